"""imprint: did this text leave an imprint on this language model?

The Python API, pandas-first (each name imported on first use, so ``import imprint`` and the
command line start as fast as before)::

    import imprint

    run = imprint.run(model="smollm2-135m", data="wikimia:32", attacks="loss,zlib")
    run.scores                 # one row per text: label, text, meta.*, a column per attack
    run.metrics.to_frame()     # one row per attack x figure: estimate, low, high, method, unit
    imprint.load_run("runs/latest"), imprint.load_study(...), imprint.load_audit(...)
"""

__version__ = "0.1.0"

#: name -> the module that defines it; imported when the name is first used (by name, so
#: importing imprint imports none of the pipeline)
_LAZY = {
    "run": "imprint.run",  # the package is callable: imprint.run(model=..., data=..., ...)
    "load_run": "imprint.run.folder",
    "load_study": "imprint.study.folder",
    "load_audit": "imprint.audit.folder",
    "Run": "imprint.run.folder",
    "Study": "imprint.study.folder",
    "Audit": "imprint.audit.folder",
    "RunConfig": "imprint.run.config",
    "Interval": "imprint.metrics.interval",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:  # no typing or importlib import: the CLI starts here
    if name not in _LAZY:
        raise AttributeError(f"module 'imprint' has no attribute {name!r}")
    from importlib import import_module

    module = import_module(_LAZY[name])
    value = module if _LAZY[name] == f"imprint.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
