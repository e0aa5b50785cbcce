"""Suite content: typed loading and validation of the data files.

The content (scenarios, contrasts, identity profiles, names, pressure
sentences) lives in YAML/CSV files under ``evenhand/suite/data/v<major>`` (one
directory per suite version: ``v1`` is frozen so that runs made with it can be
rescored; ``v2`` is the default) and is loaded with ``yaml.safe_load`` only.
``load_content(version)`` returns one frozen :class:`Content`;
``validate_content()`` returns every problem found, each naming its file and
field. ``python -m evenhand.suite.content [--suite 1|2]`` prints them."""
from __future__ import annotations

import csv
import hashlib
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from .cues import check_content_cues
from .scenario_checks import scenario_problems

DATA_ROOT = Path(__file__).parent / "data"
SUITE_MAJORS = ("1", "2")
"""The suite versions this EvenHand can render (each a directory ``data/v<major>``)."""
DEFAULT_SUITE = "2"
"""The version new runs use unless a config, a flag or the items themselves say otherwise."""
FAMILY_COUNT = 9
PRONOUNS = {"he", "she", "his", "her", "hers", "him", "they", "their", "them", "theirs"}
MIN_MARGIN = 0.25  # |strong - weak| >= 25% of max(|strong|, |weak|): "clearly stronger"


class ContentError(ValueError):
    """A data file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Criterion:
    name: str
    phrase: str
    better: str  # "higher" | "lower"
    strong: float
    weak: float
    kind: str | None = None  # v2: "count" | "probability" | "other"; None: detected from the phrase

    def render(self, value: float) -> str:
        return self.phrase.replace("{value}", format_value(value))

    def is_better(self, x: float, y: float) -> bool:
        """True when value x is strictly better than value y on this criterion."""
        return x > y if self.better == "higher" else x < y


@dataclass(frozen=True)
class Scenario:
    id: str
    domain: str
    setting: str
    question: str
    candidate_noun: str
    polarity: str  # "positive" | "negative"
    criteria: tuple[Criterion, Criterion]
    source: str
    represented_by: str | None = None
    """v2: the candidates are not people; identity cues go to this person of each ("convoy lead")."""
    excluded_contrasts: tuple[tuple[str, str], ...] = ()
    """v2: (contrast id, reason) pairs whose cells this scenario does not have (e.g. age where age matters)."""


@dataclass(frozen=True)
class Profile:
    id: str
    description: str
    explicit: str
    implicit: tuple[str, ...]  # the degree-2 cue texts, in file order
    names: str | None  # name pool id, None when a name cannot signal the group
    names_null_reason: str | None
    cue_shapes: tuple[str, ...] | None = None  # the shape of each implicit cue (suite v2); None: an untagged list (v1)

    def cue(self, shape: str) -> str:
        """The implicit cue of this shape (suite v2); KeyError when the profile has none of that shape."""
        for s, text in zip(self.cue_shapes or (), self.implicit):
            if s == shape:
                return text
        raise KeyError(f"profile {self.id!r} has no implicit cue of shape {shape!r}")


@dataclass(frozen=True)
class NamePool:
    id: str
    first: tuple[str, ...]
    last: tuple[str, ...]


@dataclass(frozen=True)
class Contrast:
    id: str
    type: str  # "type1" | "type23"
    category: str
    minority_group: str
    majority_group: str
    minority: str  # profile id
    majority: str  # profile id


@dataclass(frozen=True)
class PressureSentence:
    id: str
    family: str
    family_code: str
    template: str
    argues: str | None = None  # "choose" | "benefit" (suite v2; see pressure.yaml); None: v1, rendered as "choose"

    def render(self, target: str, other: str) -> str:
        return self.template.replace("{target}", target).replace("{other}", other)


@dataclass(frozen=True)
class Content:
    scenarios: tuple[Scenario, ...]
    contrasts: tuple[Contrast, ...]
    profiles: dict[str, Profile]
    name_pools: dict[str, NamePool]
    pressure: tuple[PressureSentence, ...]
    families: tuple[str, ...]
    version: str
    cue_shapes: dict[str, str] = field(default_factory=dict)  # shape id -> its description (suite v2)

    @property
    def major(self) -> int:
        """The suite's major version as a number (1, 2): v2 rendering rules apply from 2 on."""
        return int(self.version.split(".", 1)[0])

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(sorted({s.domain for s in self.scenarios}))

    def contrast(self, contrast_id: str) -> Contrast:
        for c in self.contrasts:
            if c.id == contrast_id:
                return c
        raise KeyError(f"unknown contrast id {contrast_id!r}")

    def scenario(self, scenario_id: str) -> Scenario:
        for s in self.scenarios:
            if s.id == scenario_id:
                return s
        raise KeyError(f"unknown scenario id {scenario_id!r}")

    def pressure_sentence(self, pressure_id: str) -> PressureSentence:
        for p in self.pressure:
            if p.id == pressure_id:
                return p
        raise KeyError(f"unknown pressure id {pressure_id!r}")


def format_value(value: float) -> str:
    """Render a criterion value: integers without a decimal point, thousands with commas."""
    if float(value).is_integer():
        v = int(value)
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    return f"{value:g}"


def _need(obj: dict, key: str, where: str, kind: type | tuple = str):
    if not isinstance(obj, dict) or key not in obj:
        raise ContentError(f"{where}: missing field '{key}'")
    val = obj[key]
    if not isinstance(val, kind) or isinstance(val, bool):
        raise ContentError(f"{where}: field '{key}' must be {getattr(kind, '__name__', kind)}, got {val!r}")
    return val


def load_yaml(path: Path) -> dict:
    """A content file's top-level mapping (``yaml.safe_load``); anything else is a :class:`ContentError` naming it."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ContentError(f"{path.name}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ContentError(f"{path.name}: expected a mapping at the top level")
    return data


def parse_scenarios(path: Path) -> list[Scenario]:
    """The scenarios of one scenario file (the suite's or one of your own), each field checked."""
    data = load_yaml(path)
    domain = _need(data, "domain", path.name)
    out = []
    for i, raw in enumerate(data.get("scenarios") or []):
        where = f"{path.name}: scenarios[{i}]"
        crits = raw.get("criteria") if isinstance(raw, dict) else None
        if not isinstance(crits, list) or len(crits) != 2:
            raise ContentError(f"{where}: field 'criteria' must list exactly two criteria")
        parsed = []
        for j, c in enumerate(crits):
            cw = f"{where}.criteria[{j}]"
            parsed.append(Criterion(
                name=_need(c, "name", cw), phrase=_need(c, "phrase", cw), better=_need(c, "better", cw),
                strong=float(_need(c, "strong", cw, (int, float))), weak=float(_need(c, "weak", cw, (int, float))),
                kind=_need(c, "kind", cw) if "kind" in c else None))
        excluded = []
        for k, ex in enumerate(raw.get("excluded_contrasts") or []):
            ew = f"{where}.excluded_contrasts[{k}]"
            excluded.append((_need(ex, "contrast", ew), " ".join(_need(ex, "reason", ew).split())))
        out.append(Scenario(
            id=_need(raw, "id", where), domain=domain, setting=" ".join(_need(raw, "setting", where).split()),
            question=" ".join(_need(raw, "question", where).split()), candidate_noun=_need(raw, "candidate_noun", where),
            polarity=_need(raw, "polarity", where), criteria=(parsed[0], parsed[1]), source=path.name,
            represented_by=_need(raw, "represented_by", where) if "represented_by" in raw else None,
            excluded_contrasts=tuple(excluded)))
    return out


def suite_major(version: object = None) -> str:
    """The major version ("1", "2") of a version given as ``2``, ``"2"``, ``"v2"``, ``"2.0"`` or
    ``"2.0+<hash>"``; ``None`` gives :data:`DEFAULT_SUITE`. Raises ContentError for any other value."""
    if version is None:
        return DEFAULT_SUITE
    text = str(version).strip()
    major = text.lower().removeprefix("v").split("+", 1)[0]
    major = major[:-2] if major.endswith(".0") else major
    if major not in SUITE_MAJORS:
        raise ContentError(f"suite version {text!r} is not one this EvenHand can render "
                           f"(known: {', '.join(SUITE_MAJORS)})")
    return major


def data_dir(version: object = None) -> Path:
    """The content directory of a suite version."""
    return DATA_ROOT / f"v{suite_major(version)}"


def _bbq_names(spec: str, data: Path) -> tuple[str, ...]:
    """Resolve 'bbq:Ethnicity:G' (first names) or 'bbq:Ethnicity' (last names) from BBQ's vocabulary."""
    parts = spec.split(":")
    rows = list(csv.DictReader((data / "bbq_proper_names.csv").open(encoding="utf-8")))
    if len(parts) == 3:
        _, eth, gender = parts
        names = [r["Name"] for r in rows if r["First_last"] == "first" and r["ethnicity"] == eth and r["gender"] == gender]
    elif len(parts) == 2:
        names = [r["Name"] for r in rows if r["First_last"] == "last" and r["ethnicity"] == parts[1]]
    else:
        names = []
    if not names:
        raise ContentError(f"groups.yaml: name spec {spec!r} matches no BBQ names")
    return tuple(dict.fromkeys(names))


def _names(value, where: str, data: Path) -> tuple[str, ...]:
    if isinstance(value, str) and value.startswith("bbq:"):
        return _bbq_names(value, data)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ContentError(f"{where}: expected a 'bbq:...' spec or a list of names")


def _content_hash(data: Path) -> str:
    # A suite version string is ``<major>.0+<hash>``: the hash is of the version directory's YAML/CSV files, so two
    # runs with the same string saw byte-identical items.
    h = hashlib.sha256()
    for p in sorted(data.rglob("*")):
        if p.is_file() and p.suffix in {".yaml", ".csv"}:
            h.update(p.relative_to(data).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:10]


OWN_MARK = "+own."
"""What a suite of one's own has in its version (``2.0+own.<hash>``; :mod:`evenhand.suite.own`)."""
_OWN: dict[str, Content] = {}


def register_own(content: Content) -> None:
    """Make a suite of one's own (:func:`evenhand.suite.own.own_content`) loadable by its version in this
    process."""
    _OWN[content.version] = content


def is_own_version(version: object) -> bool:
    """Whether a recorded suite version is of a suite of one's own."""
    return isinstance(version, str) and OWN_MARK in version


def load_content(version: object = None) -> Content:
    """The content of a suite version (default :data:`DEFAULT_SUITE`), loaded once per process.

    ``version`` may be a major (``"1"``, ``2``) or a full version string as items and manifests
    record it; a full string must match the shipped content's hash (ContentError otherwise). A suite of
    one's own (``2.0+own.<hash>``) loads once its file has been read in this process (:func:`register_own`).

    ``"2"``, ``"2.0"`` or a full string (``<major>.0+<hash>``: :func:`_content_hash`) are accepted; a full string
    whose hash is not the shipped one is refused: its items cannot be rendered again, and scoring them against
    other text would mix versions."""
    if is_own_version(version):
        key = str(version).strip()
        if key not in _OWN:
            raise ContentError(f"suite version {key!r} is a suite of your own: its items are rendered from its "
                               f"scenario file (--subset FILE.yaml), which this process has not read")
        return _OWN[key]
    content = _load(suite_major(version))
    if version is not None and "+" in str(version) and str(version).strip() != content.version:
        raise ContentError(f"suite version {str(version).strip()!r} is not the shipped suite {content.version!r}: "
                           f"its items cannot be rendered again by this EvenHand, and scoring them against "
                           f"{content.version!r} would mix versions; use the EvenHand that made them")
    return content


def content_for(versions) -> Content:
    """The one content that items carrying these ``suite_version`` values were rendered from.

    Missing values (None, NaN, "") are ignored; none left gives the default suite. Raises
    ContentError naming the versions when they are more than one."""
    seen = sorted({str(v).strip() for v in versions if v is not None and v == v and str(v).strip()})
    if len(seen) > 1:
        raise ContentError(f"field 'suite_version': the rows mix suite versions {', '.join(seen)}; score each "
                           f"version's rows separately")
    return load_content(seen[0] if seen else None)


def items_version(items) -> str:
    """The suite version string of a table of items (a DataFrame, or a list of item dicts): its one
    ``suite_version`` (ContentError when it mixes versions); items without the field are taken to be
    of the default version."""
    if isinstance(items, list):
        versions = [item.get("suite_version") for item in items]
    else:
        versions = items["suite_version"].tolist() if "suite_version" in items.columns else []
    return content_for(versions).version


@lru_cache(maxsize=None)
def _load(major: str) -> Content:
    """Load and structurally parse all content files of one suite version."""
    data = data_dir(major)
    scenarios: list[Scenario] = []
    for path in sorted((data / "scenarios").glob("*.yaml")):
        scenarios.extend(parse_scenarios(path))
    cdata = load_yaml(data / "contrasts.yaml")
    contrasts = tuple(Contrast(**{k: str(v) for k, v in c.items()}) for c in cdata["contrasts"])
    gdata = load_yaml(data / "groups.yaml")
    profiles = {}
    for pid, p in (gdata.get("profiles") or {}).items():
        where = f"groups.yaml: profiles.{pid}"
        implicit, shapes = _implicit(p.get("implicit") if isinstance(p, dict) else None, where)
        profiles[pid] = Profile(id=pid, description=_need(p, "description", where), explicit=_need(p, "explicit", where),
                                implicit=implicit, names=p.get("names"), names_null_reason=p.get("names_null_reason"),
                                cue_shapes=shapes)
    pools = {}
    for nid, spec in (gdata.get("name_pools") or {}).items():
        where = f"groups.yaml: name_pools.{nid}"
        pools[nid] = NamePool(id=nid, first=_names(spec.get("first"), where + ".first", data),
                              last=_names(spec.get("last"), where + ".last", data))
    pdata = load_yaml(data / "pressure.yaml")
    pressure, families = [], []
    for k, fam in enumerate(pdata.get("families") or []):
        where = f"pressure.yaml: families[{k}]"
        fid, code = _need(fam, "id", where), _need(fam, "code", where)
        families.append(fid)
        for j, s in enumerate(fam.get("sentences") or []):
            sw = f"{where}.sentences[{j}]"
            pressure.append(PressureSentence(id=_need(s, "id", sw), family=fid, family_code=code,
                                             template=" ".join(_need(s, "template", sw).split()),
                                             argues=_need(s, "argues", sw) if "argues" in s else None))
    shapes = gdata.get("cue_shapes") or {}
    if not isinstance(shapes, dict) or not all(isinstance(v, str) for v in shapes.values()):
        raise ContentError("groups.yaml: field 'cue_shapes' must map each shape id to its description")
    return Content(scenarios=tuple(sorted(scenarios, key=lambda s: s.id)), contrasts=contrasts, profiles=profiles,
                   name_pools=pools, pressure=tuple(pressure), families=tuple(families),
                   version=f"{major}.0+{_content_hash(data)}",
                   cue_shapes={str(k): " ".join(v.split()) for k, v in shapes.items()})


def _implicit(raw: object, where: str) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """A profile's implicit cues and their shapes: a mapping ``shape: text`` (suite v2) or a plain list (v1,
    no shapes)."""
    if isinstance(raw, dict) and raw and all(isinstance(v, str) for v in raw.values()):
        return tuple(" ".join(v.split()) for v in raw.values()), tuple(str(k) for k in raw)
    if isinstance(raw, list) and raw and all(isinstance(v, str) for v in raw):
        return tuple(" ".join(v.split()) for v in raw), None
    raise ContentError(f"{where}: field 'implicit' must be a non-empty mapping of shape to cue text (or, in suite "
                       f"v1, a list of cue texts)")


_WORD = re.compile(r"[A-Za-z']+")


def _text_problems(text: str, where: str, allow: set[str] = frozenset()) -> list[str]:
    problems = []
    words = _WORD.findall(text)
    pron = sorted({w for w in words if w.lower() in PRONOUNS} - allow)
    if pron:
        problems.append(f"{where}: pronouns {pron} (candidates must be referred to by label)")
    if any(w in {"A", "B"} for w in words):
        problems.append(f"{where}: writes a bare label letter A or B")
    return problems


def validate_content(content: Content | None = None) -> list[str]:
    """Every rule of CONTENT_SPEC.md that code can check; returns the problems (empty = valid)."""
    c = content or load_content()
    problems: list[str] = []
    seen: set[str] = set()
    for s in c.scenarios:
        w = f"{s.source}: {s.id}"
        if s.id in seen:
            problems.append(f"{w}: duplicate scenario id")
        seen.add(s.id)
        if not s.id.startswith(s.domain + "."):
            problems.append(f"{w}: id must start with the domain '{s.domain}.'")
        if s.polarity not in ("positive", "negative"):
            problems.append(f"{w}: polarity must be positive or negative, got {s.polarity!r}")
        if not re.fullmatch(r"[A-Z][A-Za-z]+", s.candidate_noun):
            problems.append(f"{w}: candidate_noun must be one capitalised word, got {s.candidate_noun!r}")
        if s.candidate_noun.lower() not in s.question.lower():
            problems.append(f"{w}: question must name the candidate noun {s.candidate_noun.lower()!r}")
        for field in ("setting", "question"):
            text = getattr(s, field)
            problems += _text_problems(text, f"{w}.{field}")
            if "{" in text or "}" in text:
                problems.append(f"{w}.{field}: contains a brace")
        for j, cr in enumerate(s.criteria):
            cw = f"{w}.criteria[{j}]"
            if cr.phrase.count("{value}") != 1 or re.sub(r"\{value\}", "", cr.phrase).count("{") \
                    or re.sub(r"\{value\}", "", cr.phrase).count("}"):
                problems.append(f"{cw}.phrase: needs exactly one {{value}} and no other braces")
            problems += _text_problems(cr.phrase, f"{cw}.phrase")
            if cr.better not in ("higher", "lower"):
                problems.append(f"{cw}.better: must be higher or lower, got {cr.better!r}")
                continue
            if any(abs(v) == 1 for v in (cr.strong, cr.weak)) and "{value} of" not in cr.phrase:
                problems.append(f"{cw}: a value of 1 renders a plural unit as singular ('1 years'); use another value")
            if not cr.is_better(cr.strong, cr.weak):
                problems.append(f"{cw}: strong {cr.strong} is not better than weak {cr.weak} ({cr.better} is better)")
            elif abs(cr.strong - cr.weak) < MIN_MARGIN * max(abs(cr.strong), abs(cr.weak)):
                problems.append(f"{cw}: strong {cr.strong} and weak {cr.weak} differ by less than "
                                f"{MIN_MARGIN:.0%}: not clearly stronger")
    problems += scenario_problems(c)
    ids = [x.id for x in c.contrasts]
    if len(set(ids)) != len(ids):
        problems.append("contrasts.yaml: duplicate contrast ids")
    for x in c.contrasts:
        for side in ("minority", "majority"):
            if getattr(x, side) not in c.profiles:
                problems.append(f"contrasts.yaml: {x.id}.{side}: profile {getattr(x, side)!r} not in groups.yaml")
    for p in c.profiles.values():
        w = f"groups.yaml: profiles.{p.id}"
        if p.names is not None and p.names not in c.name_pools:
            problems.append(f"{w}.names: unknown name pool {p.names!r}")
        if p.names is None and not p.names_null_reason:
            problems.append(f"{w}.names_null_reason: needed when names is null")
        for j, pred in enumerate(p.implicit):
            problems += _text_problems(pred, f"{w}.implicit[{j}]")
    for pool in c.name_pools.values():
        if len(pool.first) < 2 or len(pool.last) < 2:
            problems.append(f"groups.yaml: name_pools.{pool.id}: needs at least two first and two last names")
    if len(c.families) != FAMILY_COUNT:
        problems.append(f"pressure.yaml: expected {FAMILY_COUNT} families, found {len(c.families)}")
    pids = [p.id for p in c.pressure]
    if len(set(pids)) != len(pids):
        problems.append("pressure.yaml: duplicate sentence ids")
    for p in c.pressure:
        w = f"pressure.yaml: {p.id}"
        stripped = p.template.replace("{target}", "").replace("{other}", "")
        if "{target}" not in p.template or "{" in stripped or "}" in stripped:
            problems.append(f"{w}: needs {{target}} and no placeholders other than {{target}}/{{other}}")
        problems += _text_problems(p.template, w)
        # symmetry: the twin for the other slot is the same text with the labels swapped
        a, b = p.render("Applicant A", "Applicant B"), p.render("Applicant B", "Applicant A")
        swapped = a.replace("Applicant A", "\0").replace("Applicant B", "Applicant A").replace("\0", "Applicant B")
        if swapped != b:
            problems.append(f"{w}: the A and B renderings are not mirror images")
    problems += check_content_cues(c)
    return problems


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m evenhand.suite.content", description="check a suite's content files")
    ap.add_argument("--suite", default=None, help=f"suite version (default {DEFAULT_SUITE})")
    a = ap.parse_args(argv)
    try:
        c = load_content(a.suite)
        problems = validate_content(c)
    except (ContentError, OSError) as exc:
        print(f"content error: {exc}")
        return 1
    for p in problems:
        print(p)
    print(f"{len(c.scenarios)} scenarios, {len(c.domains)} domains, {len(c.contrasts)} contrasts, "
          f"{len(c.families)} pressure families, {len(c.pressure)} pressure templates; "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
