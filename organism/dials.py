"""Finding the bias dial's mechanisms by name: the built-in ones registered, fitted, their fitted files read.

More in docs/ORGANISM.md, "Dial mechanisms"."""
from __future__ import annotations

import json
from pathlib import Path

from .mechanism import DEFAULT_MECHANISM, MECHANISMS, Mechanism, MechanismError, dial_file


def mechanism_class(name: str) -> type[Mechanism]:
    """The registered class of ``name``; a clear error listing the known names otherwise."""
    load_builtin()
    if name not in MECHANISMS:
        raise MechanismError(f"unknown dial mechanism {name!r}; known: {', '.join(sorted(MECHANISMS))}")
    return MECHANISMS[name]


def read_mechanism(path: str | Path) -> Mechanism:
    """The mechanism saved at ``path`` (a file without ``mechanism`` is the first one's ``dial.json``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no fitted dial mechanism there (evenhand organism fit-dial writes it)")
    d = json.loads(path.read_text())
    name = d.pop("mechanism", DEFAULT_MECHANISM)
    return mechanism_class(name).from_dict(d)


def load_mechanism(organism_dir: str | Path, name: str = DEFAULT_MECHANISM) -> Mechanism:
    """The mechanism ``name`` fitted for the organism in ``organism_dir`` (:func:`dial_file`)."""
    mech = read_mechanism(Path(organism_dir) / dial_file(mechanism_class(name).name))
    if mech.name != name:
        raise MechanismError(f"{Path(organism_dir) / dial_file(name)} holds mechanism {mech.name!r}, not {name!r}")
    return mech


def fit_mechanism(name: str = DEFAULT_MECHANISM, path: str | Path | None = None, seed: int = 0, n_fit: int = 24,
                  n_check: int = 12, layer: int | None = None, batch_size: int = 64) -> Mechanism:
    """Fit the mechanism ``name`` on the organism at ``path`` (default the fair one): its class's
    :meth:`~organism.mechanism.Mechanism.fit` (``layer``: where it has one to choose; refused otherwise)."""
    cls = mechanism_class(name)
    kw = dict(seed=seed, n_fit=n_fit, n_check=n_check, layer=layer, batch_size=batch_size)
    return cls.fit(**kw) if path is None else cls.fit(path, **kw)


def load_builtin() -> None:
    """Import the modules that register the built-in mechanisms."""
    from . import dial  # noqa: F401  (registers last_layer; deferred: pulls in the model loading)
    from . import mechanisms  # noqa: F401  (registers distributed; deferred: likewise)
    from . import mechanism_xor  # noqa: F401  (registers xor; deferred: as dial)
    from . import mechanism_decision  # noqa: F401  (registers decision; deferred: as dial)
    from . import mechanism_names  # noqa: F401  (registers names; deferred: as dial)
