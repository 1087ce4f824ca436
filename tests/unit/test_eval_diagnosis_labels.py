"""The diagnosis scorer's labels: every id must be a signal (a misspelled id would score as a silent miss)."""

from pathlib import Path

import pytest

from kwiki.evals.diagnosis import load_labels

LABEL = """\
{aliases}
k1:
  kind: pathology
  expected_first: {first}
  acceptable_top3: [dram-bound]
  not_first: [healthy]
"""


def write(tmp_path: Path, first: str, aliases: str = "") -> Path:
    (tmp_path / "labels.yaml").write_text(LABEL.format(first=first, aliases=aliases), encoding="utf-8")
    return tmp_path


def test_an_unknown_id_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"k1 names \['instruction-fetch'\].*aliases"):
        load_labels(write(tmp_path, "instruction-fetch"))


def test_an_alias_maps_a_writer_s_name_to_the_signal(tmp_path: Path) -> None:
    folder = write(tmp_path, "instruction-fetch", "aliases:\n  instruction-fetch: instruction-fetch-stalls")
    assert load_labels(folder)["k1"].expected_first == "instruction-fetch-stalls"


def test_known_ids_and_healthy_load_as_written(tmp_path: Path) -> None:
    label = load_labels(write(tmp_path, "uncoalesced-global"))["k1"]
    assert (label.expected_first, label.acceptable_top3, label.not_first) == ("uncoalesced-global", ["dram-bound"], ["healthy"])
