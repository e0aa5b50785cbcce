"""One builder for every option and config dataclass: YAML -> a (nested) frozen dataclass, and a
dataclass's fields -> command-line flags.

- :func:`read_yaml` reads a config file (``yaml.safe_load`` only: no code runs from a config);
- :func:`build` maps a mapping onto a dataclass, field by field and recursively into nested
  dataclasses, checking names, types and the allowed values in :class:`Rules`; every error names the
  field path (``suite.subset``), and an unknown field suggests the closest known one;
- :func:`field_docs` reads a dataclass's field docstrings (the string under each field);
- :func:`add_flags` adds one ``--flag`` per field to an argparse parser, with the field's default and
  docstring, and a ``Literal[...]`` field's values as its ``choices``, so that a default and a set of
  allowed values are written once, on the dataclass.

The core module so that every layer (the engine, probes, interventions, experiments) can use it.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import inspect
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path


class ConfigError(ValueError):
    """A config is invalid; the message names the field."""


@dataclass(frozen=True)
class Rules:
    """Checks beyond the type, keyed by field path (``probe.engine``)."""
    choices: Mapping[str, tuple] = field(default_factory=dict)
    """The allowed values of a field."""
    tuple_choices: Mapping[str, tuple] = field(default_factory=dict)
    """The values each element of a list field may take."""
    positive: frozenset[str] = frozenset()
    """Fields that must be at least 1 (when set)."""
    at_least_two: frozenset[str] = frozenset()
    """Fields that must be at least 2."""


NO_RULES = Rules()


def _check(value, tp, where: str, rules: Rules):
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check(value, inner[0], where, rules)
    if origin is typing.Literal:
        if value not in args or isinstance(value, bool) != any(isinstance(a, bool) for a in args):
            raise ConfigError(f"config field '{where}' must be one of {', '.join(map(str, args))}, got {value!r}")
        return value
    if is_dataclass(tp):
        first = fields(tp)[0]
        if isinstance(value, str) and first.default is MISSING and first.default_factory is MISSING:
            return tp(value)  # a one-string shorthand of the first (required) field, e.g. model: NAME
        if not isinstance(value, dict):
            raise ConfigError(f"config field '{where}' must be a mapping, got {type(value).__name__}")
        return build(tp, value, where + ".", rules)
    if origin is tuple:
        if isinstance(value, (str, int)):
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"config field '{where}' must be a list, got {type(value).__name__}")
        return tuple(_check(v, args[0], f"{where}[{i}]", rules) for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config field '{where}' must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config field '{where}' must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config field '{where}' must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config field '{where}' must be a string, got {value!r}")
        return value
    if tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"config field '{where}' must be a mapping, got {type(value).__name__}")
        return value
    raise ConfigError(f"config field '{where}': unsupported type {tp}")


def build(cls, data: dict, prefix: str = "", rules: Rules = NO_RULES):
    """Map ``data`` onto dataclass ``cls`` (nested dataclasses from nested mappings), checking names,
    types and ``rules``; errors (:class:`ConfigError`) name the field path."""
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else f"; known: {', '.join(known)}"
            raise ConfigError(f"config field '{prefix}{key}' is not known{hint}")
    kwargs = {}
    for name, f in known.items():
        where = prefix + name
        if name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ConfigError(f"config field '{where}' is required")
            continue
        value = _check(data[name], hints[name], where, rules)
        if where in rules.choices and value not in rules.choices[where]:
            allowed = ", ".join(str(c) for c in rules.choices[where] if c is not None)
            raise ConfigError(f"config field '{where}' must be one of {allowed}, got {value!r}")
        if where in rules.positive and value is not None and value < 1:
            raise ConfigError(f"config field '{where}' must be at least 1, got {value}")
        if where in rules.at_least_two and value < 2:
            raise ConfigError(f"config field '{where}' must be at least 2, got {value}")
        if where in rules.tuple_choices and value is not None:
            bad = [v for v in value if v not in rules.tuple_choices[where]]
            if bad:
                allowed = ", ".join(map(str, rules.tuple_choices[where]))
                raise ConfigError(f"config field '{where}' may only list {allowed}, got {bad[0]!r}")
        kwargs[name] = value
    return cls(**kwargs)


def read_yaml(path: str | Path) -> dict:
    """A config file's mapping (``yaml.safe_load``), with errors that name the file."""
    import yaml
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a mapping of fields")
    return data


def field_docs(cls) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), first sentence
    joined onto one line; fields without one are absent."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, nxt in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def literal_values(tp) -> tuple | None:
    """The allowed values of a ``Literal[...]`` type (also ``Literal[...] | None`` and ``tuple[Literal[...], ...]``),
    else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return literal_values(inner[0]) if len(inner) == 1 else None
    if typing.get_origin(tp) is tuple:
        return literal_values(typing.get_args(tp)[0])
    return typing.get_args(tp) if typing.get_origin(tp) is typing.Literal else None


def alias_help(text: str, aliases: Iterable[str]) -> str:
    """``text`` with its flag's older spellings named: ``... (alias: --degree)``."""
    aliases = list(aliases)
    return f"{text} (alias: {', '.join(aliases)})" if aliases else text


def one_value(why: str) -> type[argparse.Action]:
    """An argparse action for a flag spelled as taking several values (``--degrees``) where the command takes
    one: it stores the single value and refuses more with ``why``."""
    class OneValue(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            if len(values) != 1:
                parser.error(f"{option_string} takes one value here, got {' '.join(map(str, values))}: {why}")
            setattr(namespace, self.dest, values[0])
    return OneValue


def add_flags(parser: argparse.ArgumentParser, cls, names: Iterable[str], flags: Mapping[str, str] | None = None,
              choices: Mapping[str, Iterable] | None = None, defaults: Mapping[str, object] | None = None,
              aliases: Mapping[str, Iterable[str]] | None = None, single: Mapping[str, str] | None = None) -> None:
    """Add ``--field-name`` flags for the fields ``names`` of dataclass ``cls``: type, default and help
    from the field (its docstring; a field without one is an error: no flag without help), choices from a
    ``Literal[...]`` field; ``flags`` renames a flag, ``choices`` restricts its values and
    ``defaults`` gives a default the dataclass leaves to its caller. A field without a default is a
    required flag; a bool field defaulting to False becomes a switch; a tuple field takes one or more
    values. ``aliases`` gives a flag older spellings (parsed to the same field, named in its help);
    ``single`` marks a one-value field whose flag is spelled as a plural (:func:`one_value`, with why)."""
    hints = typing.get_type_hints(cls)
    by_name = {f.name: f for f in fields(cls)}
    docs = field_docs(cls)
    for name in names:
        f = by_name[name]
        if defaults and name in defaults:
            default = defaults[name]
        elif f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = None
        flag = (flags or {}).get(name, "--" + name.replace("_", "-"))
        kw: dict = {"dest": flag.lstrip("-").replace("-", "_"), "default": default}
        if f.default is MISSING and f.default_factory is MISSING and not (defaults and name in defaults):
            kw = {"dest": kw["dest"], "required": True}  # no default on the dataclass: the flag is required
        if name not in docs:
            raise ValueError(f"{cls.__name__}.{name} has no docstring: a flag needs its help")
        kw["help"] = alias_help(docs[name].replace("%", "%%"), (aliases or {}).get(name, ()))
        strings = [flag, *(aliases or {}).get(name, ())]
        tp = hints[name]
        allowed = literal_values(tp)
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            tp = [a for a in typing.get_args(tp) if a is not type(None)][0]
        if tp is bool:
            if default or kw.get("required"):
                raise ValueError(f"{cls.__name__}.{name}: a switch must default to False")
            parser.add_argument(*strings, action="store_true", **{k: v for k, v in kw.items() if k != "default"})
            continue
        if typing.get_origin(tp) is tuple:
            kw["nargs"] = "+"
            tp = typing.get_args(tp)[0]
            if default is not None and "default" in kw:
                kw["default"] = list(default)
        if allowed is not None:
            types_ = {type(v) for v in allowed}
            if len(types_) == 1 and types_ <= {int, float}:
                kw["type"] = types_.pop()
            kw["choices"] = list(allowed)
        if tp in (int, float):
            kw["type"] = tp
        if choices and name in choices:
            kw["choices"] = list(choices[name])
        if single and name in single:
            kw.update(nargs="+", action=one_value(single[name]), metavar=name.upper())
            kw["help"] = kw["help"].replace(docs[name], docs[name] + " One value.", 1)
        parser.add_argument(*strings, **kw)


def options_from_args(cls, args: argparse.Namespace, names: Iterable[str], flags: Mapping[str, str] | None = None,
                      **extra):
    """An instance of ``cls`` from the parsed flags of fields ``names`` (renamed as in :func:`add_flags`;
    tuple fields as tuples) and ``extra``."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name in names:
        value = getattr(args, (flags or {}).get(name, name).lstrip("-").replace("-", "_"))
        if value is not None and typing.get_origin(hints[name]) is tuple:
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs, **extra)
