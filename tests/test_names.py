import pytest

from sumo_cli import names
from sumo_cli.errors import UserError


@pytest.mark.parametrize(
    "typed, canonical, body, arch, strategy",
    [
        ("bug-lstm", "bug-lstm", "bug", "lstm", "none"),
        ("ant-mlp", "ant-mlp", "ant", "mlp", "none"),
        ("ant-meta", "ant-meta", "ant", "lstm", "meta"),
        ("ant-lstm-meta", "ant-meta", "ant", "lstm", "meta"),
        ("spider-mlp-meta", "spider-mlp-meta", "spider", "mlp", "meta"),
        ("bug-track", "bug-track", "bug", "lstm", "track"),
        ("bug-lstm-track", "bug-track", "bug", "lstm", "track"),
        ("ant-mlp-track", "ant-mlp-track", "ant", "mlp", "track"),
        ("spider-rl2", "spider-rl2", "spider", "lstm", "rl2"),
        ("ANT-META", "ant-meta", "ant", "lstm", "meta"),
        ("zoo-ant-lstm-v3", "zoo-ant-lstm-v3", "ant", "lstm", "none"),
    ],
)
def test_grammar_accepts_the_seven_combinations_and_zoo(typed, canonical, body, arch, strategy):
    ref = names.parse(typed)
    assert (ref.name, ref.body, ref.arch, ref.strategy, ref.version) == (canonical, body, arch, strategy, None)


def test_version_suffix():
    ref = names.parse("ant-meta@700")
    assert ref.name == "ant-meta" and ref.version == 700 and ref.display == "ant-meta@700"


@pytest.mark.parametrize(
    "bad",
    ["ant-gru", "ant-rl2-meta", "ant-mlp-rl2", "ant-lstm-none", "ant-meta@0", "ant-meta@x", "ant-meta@-1",
     "zoo-cat-lstm-v1", "zoo-ant-gru-v1", "", "Ant Meta", "bug-", "spider-mlp-lstm"],
)
def test_grammar_rejects(bad):
    with pytest.raises(UserError):
        names.parse(bad)


def test_reject_suggests_close_combination():
    with pytest.raises(UserError, match="ant-meta"):
        names.parse("ant-mta")


def test_custom_names_resolve_but_cannot_shadow_the_grammar():
    assert names.parse("my-ant-v2").name == "my-ant-v2"
    assert names.validate_custom_name("sprinter-ant") == "sprinter-ant"
    # Names that start like a body or the zoo are reserved for the grammar, so typos are caught.
    for shadow in ("ant-meta", "ant-sprinter", "zoo-bug-mlp-v1", "x@3"):
        with pytest.raises(UserError):
            names.validate_custom_name(shadow)


def test_all_21_combination_names_are_distinct_and_reparse():
    all_names = names.all_combination_names()
    assert len(all_names) == len(set(all_names)) == 21
    for n in all_names:
        assert names.parse(n).name == n


def test_locomotion_agents_have_their_own_pseudo_body():
    assert names.locomotion_names() == ["loco-mlp", "loco-mlp-track", "loco-mlp-meta", "loco-lstm", "loco-track",
                                        "loco-meta", "loco-rl2"]
    ref = names.parse("loco-lstm-meta@2")
    assert (ref.name, ref.version, ref.body, ref.arch, ref.strategy) == ("loco-meta", 2, "loco", "lstm", "meta")
    assert names.canonical_name("loco", "mlp", "track") == "loco-mlp-track"
    with pytest.raises(UserError, match="loco-mlp"):
        names.parse("loco-mpl")
    with pytest.raises(UserError):
        names.validate_custom_name("loco-mlp")
