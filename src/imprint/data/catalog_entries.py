"""The named benchmarks of the MIA literature, one entry per name (see :mod:`~.catalog`).

Hub file layouts were read from the hub's file listings and the loading code that reads them
(MIMIR's ``mimir.py`` loading script; the SoK and Blind-MIA repositories). Where a layout could
not be confirmed, the entry matches a file pattern on the hub and says so in ``layout_note``.
:func:`builtin_benchmarks` makes them; importing this module registers nothing (the catalog
reads them when it is first used).
"""

from __future__ import annotations

from collections.abc import Callable

from imprint.data.benchmark_entry import BenchmarkEntry, DataFile, Role

#: how a family function hands on each entry it makes
Add = Callable[[BenchmarkEntry], None]

LENGTHS = (32, 64, 128, 256)
MIMIR_DOMAINS = (
    "wikipedia_(en)",
    "github",
    "pile_cc",
    "pubmed_central",
    "arxiv",
    "dm_mathematics",
    "hackernews",
)
MIMIR_SPLITS = ("ngram_7_0.2", "ngram_13_0.2", "ngram_13_0.8")
MIMIR_TEMPORAL_ARXIV = ("2020_08", "2021_01", "2021_06", "2022_01", "2022_06", "2023_01", "2023_06")
TRAP_REPETITIONS = (10, 100, 1000)
TRAP_LENGTHS = (100, 25, 50)  # 100 first: the plain name, the SoK's choice

#: The name forms, for help texts and errors.
NAME_FORMS = (
    "wikimia:{32,64,128,256}",
    "wikimia24:{32,64,128,256}",
    "wikimia25:{32,64,128,256} (built locally)",
    "mimir:DOMAIN/{ngram_7_0.2,ngram_13_0.2,ngram_13_0.8}",
    "mimir:temporal_wiki",
    "mimir:temporal_arxiv/YYYY_MM",
    "arxivmia[:dev|:test]",
    "bookmia",
    "gutenberg",
    "copyright_traps:{10,100,1000}[/{25,50}]",
)
_SHIFT = "run the blind baseline (`imprint blind`) before reading any attack's AUC"
# the hub file of each WikiMIA length (data/ of swj0419/WikiMIA, main branch)
_WIKIMIA_HUB = {
    32: "6d31a92f6d59bcdc",
    64: "c337a02056685c1a",
    128: "fff31bd5ed612836",
    256: "e984cf40f6c5b556",
}
_WIKIMIA_FIELDS = "input (text), label (1 = member, 0 = non-member)"


def _wikimia(add: Add) -> None:
    for n in LENGTHS:
        add(
            BenchmarkEntry(
                name=f"wikimia:{n}",
                family="wikimia",
                description=f"WikiMIA, Wikipedia event texts truncated to {n} words (members "
                "before 2017, non-members after 2023; Shi et al. 2024)",
                provenance="Shi et al. 2024, 'Detecting Pretraining Data from Large Language "
                "Models' (arXiv:2310.16789); hub swj0419/WikiMIA",
                licence="MIT (hub card)",
                size={32: "776", 64: "542", 128: "250", 256: "82"}[n] + " texts, both labels",
                fields=_WIKIMIA_FIELDS,
                caveats=(
                    "temporally shifted: blind baseline AUC ~0.99 (Das et al. 2024), members "
                    "and non-members differ in dates and topics, not only in membership",
                    _SHIFT,
                ),
                files=(
                    DataFile(
                        local=f"wikimia/WikiMIA_length{n}.jsonl",
                        hub_path=f"data/WikiMIA_length{n}-00000-of-00001-{_WIKIMIA_HUB[n]}.parquet",
                        also=(f"wikimia/WikiMIA_length{n}.parquet",),
                    ),
                ),
                hub_repo="swj0419/WikiMIA",
                id_prefix=f"WikiMIA_length{n}",
                length_words=n,
                layout_note="hub file names confirmed from the repository's data/ listing; "
                "the local JSONL has the hub's earlier per-length JSONL layout",
            )
        )


def _wikimia24(add: Add) -> None:
    for n in LENGTHS:
        add(
            BenchmarkEntry(
                name=f"wikimia24:{n}",
                family="wikimia24",
                description=f"WikiMIA-24, Wikipedia event summaries truncated to {n} words "
                "(members 2015-2016 events, non-members March-December 2024 events)",
                provenance="Fu et al. 2024, MIA-Tuner (arXiv:2408.08661); hub wjfu99/WikiMIA-24",
                licence="not stated in the sources read; the texts are Wikipedia (CC BY-SA 4.0)",
                size="balanced members/non-members per length; counts not confirmed here",
                fields=_WIKIMIA_FIELDS,
                caveats=(
                    "temporal split like WikiMIA: members and non-members come from different "
                    "years, so topic and date words can separate them without any model",
                    _SHIFT,
                ),
                files=(
                    DataFile(
                        local=f"wikimia24/WikiMIA_length{n}.parquet",
                        hub_glob=f"data/WikiMIA_length{n}-*.parquet",
                    ),
                ),
                hub_repo="wjfu99/WikiMIA-24",
                id_prefix=f"WikiMIA-24_length{n}",
                length_words=n,
                layout_note="split names and columns (input, label) confirmed from the "
                "builder script that pushed the set; the parquet file name under data/ is "
                "inferred from `datasets` push_to_hub and matched by pattern",
            )
        )


def _wikimia25(add: Add) -> None:
    for n in LENGTHS:
        add(
            BenchmarkEntry(
                name=f"wikimia25:{n}",
                family="wikimia25",
                description=f"WikiMIA-25 style set built here from dated documents, {n}-word "
                "bucket (see `imprint data build-temporal`)",
                provenance="built locally by `imprint data build-temporal` from a dump you "
                "choose (WikiMIA recipe; --design rdd for the SoK's regression discontinuity)",
                licence="that of the dump it was built from",
                size="as built (see the builder's manifest)",
                fields=_WIKIMIA_FIELDS,
                caveats=(
                    "a plain before/after design is temporally shifted like WikiMIA; the RDD "
                    "design narrows the window around the cutoff: check the blind baseline "
                    "the builder reports",
                ),
                files=(
                    DataFile(
                        local=f"wikimia25/wikimia_{n}.jsonl",
                    ),
                ),
                id_prefix=f"wikimia25_{n}",
                length_words=n,
                layout_note="written by the temporal builder: one JSONL per bucket",
                build_hint="imprint data build-temporal --dump FILE --member-before DATE "
                "--nonmember-after DATE --out $IMPRINT_DATA_DIR/wikimia25",
            )
        )


_MIMIR_ROOT = "cache_100_200_1000_512"
_MIMIR_PROVENANCE = (
    "Duan et al. 2024, 'Do Membership Inference Attacks Work on Large Language Models?' "
    "(arXiv:2402.07841); hub iamgroot42/mimir (members: the Pile train, non-members: the Pile test)"
)
_MIMIR_LICENCE = (
    "not confirmed here; texts are from The Pile, whose subsets keep their sources' terms"
)
_MIMIR_FIELDS = "member file and non-member file, one JSON string (the text) per line"
_MIMIR_LAYOUT = (
    "paths confirmed from the hub's mimir.py loading script (train/ = members, test/ = "
    "non-members); neighbour files are not read"
)
_MIMIR_SPLIT_CAVEAT = {
    "ngram_13_0.8": "non-members kept if under 80 % 13-gram overlap with the Pile training "
    "set: members and non-members can share up to 80 % 13-grams (the SoK's recommended split)",
    "ngram_13_0.2": "non-members with 20 %+ 13-gram overlap removed: a stricter deduplication "
    "that shifts the non-member distribution (attacks can look better than they are)",
    "ngram_7_0.2": "non-members with 20 %+ 7-gram overlap removed: the strictest deduplication, "
    "the largest distribution shift between members and non-members",
}


def _mimir_entry(
    name: str,
    stem: str,
    description: str,
    *,
    size: str,
    caveats: tuple[str, ...],
    siblings: tuple[str, ...] = (),
) -> BenchmarkEntry:
    folders: tuple[tuple[str, Role], ...] = (("train", "member"), ("test", "nonmember"))
    files = tuple(
        DataFile(
            local=f"mimir/{_MIMIR_ROOT}/{folder}/{stem}.jsonl",
            role=role,
            hub_path=f"{_MIMIR_ROOT}/{folder}/{stem}.jsonl",
        )
        for folder, role in folders
    )
    return BenchmarkEntry(
        name=name,
        family="mimir",
        description=description,
        provenance=_MIMIR_PROVENANCE,
        licence=_MIMIR_LICENCE,
        size=size,
        fields=_MIMIR_FIELDS,
        caveats=caveats,
        files=files,
        reader="member_nonmember",
        hub_repo="iamgroot42/mimir",
        id_prefix=name.replace(":", "_"),
        siblings=siblings,
        layout_note=_MIMIR_LAYOUT,
    )


def _mimir(add: Add) -> None:
    for domain in MIMIR_DOMAINS:
        for split in MIMIR_SPLITS:
            caveats = [_MIMIR_SPLIT_CAVEAT[split]]
            if domain == "github":
                caveats.append("the SoK advises against the github domain (not a sound split)")
            add(
                _mimir_entry(
                    f"mimir:{domain}/{split}",
                    f"{domain}_{split}",
                    f"MIMIR {domain} ({split}): Pile train vs Pile test texts, for models "
                    "trained on the Pile (Pythia, GPT-Neo)",
                    size="about 1,000 members + 1,000 non-members (the loading script's "
                    "check for arxiv/ngram_13_0.8); other counts not confirmed here",
                    caveats=tuple(caveats),
                    siblings=tuple(f"mimir:{domain}/{s}" for s in MIMIR_SPLITS if s != split),
                )
            )
    add(
        _mimir_entry(
            "mimir:temporal_wiki",
            "temporal_wiki",
            "MIMIR temporal Wikipedia: Pile Wikipedia members vs articles from 2023-08 on",
            size="not confirmed here",
            caveats=(
                "temporally shifted: blind baseline AUC ~0.80 (Das et al. 2024)",
                _SHIFT,
            ),
        )
    )
    for month in MIMIR_TEMPORAL_ARXIV:
        add(
            _mimir_entry(
                f"mimir:temporal_arxiv/{month}",
                f"temporal_arxiv_{month}",
                f"MIMIR temporal arXiv: Pile arXiv members vs papers from {month} on",
                size="not confirmed here",
                caveats=(
                    "temporally shifted, more so the later the month: blind baseline AUC "
                    "~0.75 on 2021_06 (Das et al. 2024)",
                    _SHIFT,
                ),
                siblings=tuple(
                    f"mimir:temporal_arxiv/{m}" for m in MIMIR_TEMPORAL_ARXIV if m != month
                ),
            )
        )


def _arxivmia(add: Add) -> None:
    parts = {
        "": ("arxiv_mia", "all"),
        ":dev": ("arxiv_mia_dev", "dev"),
        ":test": ("arxiv_mia_test", "test"),
    }
    for suffix, (stem, part) in parts.items():
        add(
            BenchmarkEntry(
                name=f"arxivmia{suffix}",
                family="arxivmia",
                description=f"ArxivMIA ({part}): arXiv abstracts (CS and Math) before vs after "
                "the target models' training data",
                provenance="Liu et al. 2024, 'Probing Language Models for Pre-training Data "
                "Detection' (ACL 2024); hub zhliu/ArxivMIA",
                licence="CC BY 4.0 (hub card)",
                size="2.1 MB of JSONL (dev 0.4 MB + test 1.7 MB; the full file is both)",
                fields="text, label (1 = member, 0 = non-member), field (cs or math)",
                caveats=(
                    "members and non-members come from different publication periods (a "
                    "post-hoc temporal split): check the blind baseline",
                    "the full set is dev + test: tune on dev, report on test",
                ),
                files=(
                    DataFile(
                        local=f"arxivmia/data/{stem}.jsonl",
                        hub_path=f"data/{stem}.jsonl",
                        also=(f"arxivmia/{stem}.jsonl",),
                    ),
                ),
                hub_repo="zhliu/ArxivMIA",
                text_field="text",
                label_field="label",
                id_prefix=stem,
                siblings={":dev": ("arxivmia:test",), ":test": ("arxivmia:dev",)}.get(suffix, ()),
                disjoint_siblings=True,
                layout_note="data/ file names confirmed from the hub listing (earlier "
                "revisions kept them at the repository root; both local paths are accepted); "
                "fields confirmed from code that reads the file",
            )
        )


def _bookmia(add: Add) -> None:
    add(
        BenchmarkEntry(
            name="bookmia",
            family="bookmia",
            description="BookMIA: 512-word book snippets, books seen by OpenAI models vs books "
            "published after their training",
            provenance="Shi et al. 2024 (arXiv:2310.16789); hub swj0419/BookMIA",
            licence="MIT (hub card); the snippets quote copyrighted books",
            size="32 MB JSONL (hub size class 1K-10K rows)",
            fields="snippet (text), label (1 = member, 0 = non-member), book_id, book, snippet_id",
            caveats=(
                "temporally shifted (new books vs old ones): blind baseline AUC ~0.91 "
                "(Das et al. 2024)",
                "many snippets per book: texts of one book are not independent samples",
                _SHIFT,
            ),
            files=(DataFile(local="bookmia/book_data.jsonl", hub_path="book_data.jsonl"),),
            hub_repo="swj0419/BookMIA",
            text_field="snippet",
            label_field="label",
            id_prefix="bookmia",
            layout_note="file name confirmed from the hub listing; text/label columns "
            "confirmed from code that reads the set",
        )
    )


def _gutenberg(add: Add) -> None:
    add(
        BenchmarkEntry(
            name="gutenberg",
            family="gutenberg",
            description="Project Gutenberg book excerpts (the collection of Das et al.'s "
            "blind-attacks study): books in a model's training data vs books added later",
            provenance="Das et al. 2024, 'Blind Baselines Beat Membership Inference Attacks "
            "for Foundation Models' (arXiv:2406.16201); GitHub ethz-spylab/Blind-MIA, "
            "data/gutenberg (after Meeus et al. 2024)",
            licence="Project Gutenberg texts (public domain in the US); the repository has no "
            "licence file",
            size="about 2,000 excerpts of ~1,000 characters (member/ and nonmember/ folders)",
            fields="member/<i>.txt and nonmember/<i>.txt, one excerpt per file",
            caveats=(
                "biased replication: blind baseline AUC ~0.96 (Das et al. 2024)",
                _SHIFT,
            ),
            files=(
                DataFile(local="gutenberg/member", role="member"),
                DataFile(local="gutenberg/nonmember", role="nonmember"),
            ),
            reader="text_dirs",
            web_url="https://github.com/ethz-spylab/Blind-MIA/tree/main/data/gutenberg",
            id_prefix="gutenberg",
            layout_note="not on the Hugging Face hub: copy data/gutenberg of the GitHub "
            "repository (git clone --depth 1 https://github.com/ethz-spylab/Blind-MIA)",
        )
    )


def _copyright_traps(add: Add) -> None:
    for reps in TRAP_REPETITIONS:
        for length in TRAP_LENGTHS:
            name = f"copyright_traps:{reps}" + ("" if length == 100 else f"/{length}")
            stem = f"seq_len_{length}_n_rep_{reps}"
            add(
                BenchmarkEntry(
                    name=name,
                    family="copyright_traps",
                    description=f"copyright traps: synthetic {length}-token sequences injected "
                    f"{reps} times into CroissantLLM's training data vs unseen ones",
                    provenance="Meeus et al. 2024, 'Copyright Traps for Large Language "
                    "Models' (ICML 2024); hub imperial-cpg/copyright-traps",
                    licence="not stated in the sources read",
                    size=f"{stem}: one parquet of ~{ {25: 75, 50: 143, 100: 279}[length] } kB",
                    fields="text, label (1 = member, 0 = non-member)",
                    caveats=(
                        "randomised ground truth (members and non-members generated the "
                        "same way): no distribution shift by design; the target model is "
                        "CroissantLLM (croissantllm/CroissantLLMBase)",
                        "lengths are LLaMA-2 tokens, not words",
                    ),
                    files=(
                        DataFile(
                            local=f"copyright_traps/data/{stem}-00000-of-00001.parquet",
                            hub_path=f"data/{stem}-00000-of-00001.parquet",
                            also=(f"copyright_traps/{stem}.parquet",),
                        ),
                    ),
                    hub_repo="imperial-cpg/copyright-traps",
                    text_field="text",
                    label_field="label",
                    id_prefix=stem,
                    siblings=tuple(
                        f"copyright_traps:{r}" + ("" if length == 100 else f"/{length}")
                        for r in TRAP_REPETITIONS
                        if r != reps
                    ),
                    layout_note="file names confirmed from the hub's data/ listing; text/label "
                    "columns confirmed from the SoK code that reads them",
                )
            )


def builtin_benchmarks() -> list[BenchmarkEntry]:
    """Every built-in benchmark entry, in catalog order (WikiMIA first); registers nothing."""
    found: list[BenchmarkEntry] = []
    for family in (_wikimia, _wikimia24, _wikimia25, _mimir, _arxivmia, _bookmia, _gutenberg):
        family(found.append)
    _copyright_traps(found.append)
    return found
