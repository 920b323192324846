"""What a new user meets first: the README's five commands and its links to the results, and the
tour's zoo line, which must not read an unset SUMO_ZOO_DIR as the current folder."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_an_empty_zoo_path_is_refused_not_read_as_the_current_folder(cli, tmp_path):
    (tmp_path / "ant-lstm-v1.npy").write_bytes(b"not a policy")  # what the current folder may hold
    code, out, err = cli("zoo", "import", "")
    assert code == 2 and "got an empty PATH (is SUMO_ZOO_DIR set?)" in " ".join(err.split()), err
    assert out == "" and not (tmp_path / "db").exists()
