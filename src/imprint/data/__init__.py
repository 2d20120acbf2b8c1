"""Data: samples, loaders for files, benchmarks and the hub, and pure transforms."""

from imprint.data.benchmarks import (
    BenchmarkInfo,
    data_defects,
    data_dirs,
    list_benchmarks,
    register_data_scheme,
    resolve_data,
)
from imprint.data.loaders import LoadedData, fingerprint_samples, load_file, load_hf_dataset
from imprint.data.sample import MEMBER, NON_MEMBER, Sample, text_hash
from imprint.data.transforms import (
    LabelConflictWarning,
    apply_transforms,
    dedupe,
    find_label_conflicts,
    min_words,
    sample_per_label,
    truncate_words,
)

__all__ = [
    "MEMBER",
    "NON_MEMBER",
    "BenchmarkInfo",
    "LabelConflictWarning",
    "LoadedData",
    "Sample",
    "apply_transforms",
    "data_defects",
    "data_dirs",
    "dedupe",
    "find_label_conflicts",
    "fingerprint_samples",
    "list_benchmarks",
    "load_file",
    "load_hf_dataset",
    "min_words",
    "register_data_scheme",
    "resolve_data",
    "sample_per_label",
    "text_hash",
    "truncate_words",
]
