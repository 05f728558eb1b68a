"""Bad config values stop start-up with a message that names the key and what is allowed."""

from pathlib import Path

import pytest

from reader.config import Config, load_config, parse_config, with_match_overrides
from reader.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_config_yaml_loads_and_equals_the_defaults():
    cfg = load_config(ROOT / "config.yaml")
    assert cfg.match == Config().match
    assert cfg.match.cards == 17 and cfg.match.memorise_s == 30


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"match": {"cardz": 3}}, r"match\.cardz: unknown key; allowed keys here: colors, cards"),
        ({"mtach": {}}, r"mtach: unknown key; allowed keys here: match, voice, audio"),
        ({"match": {"cards": 0}}, r"match\.cards: Input should be greater than or equal to 1"),
        ({"match": {"cards": "many"}}, r"match\.cards: Input should be a valid integer"),
        ({"match": {"gaps": {"between_cards_s": -1}}},
         r"match\.gaps\.between_cards_s: Input should be greater than or equal to 0"),
        ({"match": {"gaps": {"betwen_cards_s": 1}}},
         r"match\.gaps\.betwen_cards_s: unknown key; allowed keys here: after_bow_s, "
         r"after_call_s"),
        ({"match": {"bow_call": {"text": "よろしくお願いします"}}},
         r"match\.bow_call\.yomi: Field required"),
        ({"match": {"move_call": {"enabled": "maybe"}}},
         r"match\.move_call\.enabled: Input should be a valid boolean"),
        ({"match": {"cards": 21}},
         r"match: cards is 21 but the default deck \(blue\) holds only 20"),
        ({"match": {"colors": ["purple"]}}, r"match\.colors: unknown colour 'purple'; use one of"),
        ({"match": {"resume": {"policy": "rewind"}}},
         r"match\.resume\.policy: Input should be 'restart_verse', 'restart_card' or 'continue'"),
        ({"match": {"memorise_s": -5}},
         r"match\.memorise_s: Input should be greater than or equal"),
        ({"match": {"lower_verse_times": 0}}, r"match\.lower_verse_times"),
        ({"audio": {"blocksize": 5}}, r"audio\.blocksize: Input should be greater than or equal"),
        ({"voice": {"engine": "siri"}}, r"voice\.engine: Input should be 'openjtalk'"),
        ({"server": {"channels": [{"name": "a"}, {"name": "a"}]}},
         r"server\.channels: .*repeated: a"),
        ({"server": {"channels": [{"name": "A B"}]}}, r"server\.channels\.0\.name"),
        ({"server": {"channels": [{"name": "x", "devise": 1}]}},
         r"server\.channels\.0\.devise: unknown key; allowed keys here: name, device"),
        ([1, 2], r"the top level must be a mapping"),
    ],
)
def test_bad_values_name_their_key(data, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(data, "config.yaml")


def test_config_file_path_from_env_and_missing_file(tmp_path, monkeypatch):
    p = tmp_path / "hall.yaml"
    p.write_text("match:\n  cards: 5\n  colors: [青, 桃]\n", "utf-8")
    monkeypatch.setenv("YOMITE_CONFIG", str(p))
    cfg = load_config()
    assert cfg.match.cards == 5 and cfg.match.colors == ("blue", "pink")
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.yaml")
    p.write_text("match: [unclosed\n", "utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


def test_config_is_frozen():
    cfg = Config()
    with pytest.raises(Exception, match="frozen"):
        cfg.match.cards = 3  # type: ignore[misc]


def test_match_overrides_merge_and_validate():
    m = with_match_overrides(Config().match, {"cards": 3, "gaps": {"between_cards_s": 0.5}})
    assert m.cards == 3 and m.gaps.between_cards_s == 0.5 and m.gaps.between_verses_s == 1.0
    with pytest.raises(ConfigError, match=r"overrides: gaps\.between_cards_s"):
        with_match_overrides(Config().match, {"gaps": {"between_cards_s": -2}})


def test_a_call_switched_off_keeps_its_words_and_a_new_text_needs_its_reading():
    move = {"text": "次の試合場へ", "yomi": "つぎのしあいじょうへ"}
    cfg = parse_config({"match": {"bow_call": {"enabled": False}, "move_call": move}})
    m = cfg.match
    assert not m.bow_call.enabled and m.bow_call.text == "礼" and m.bow_call.yomi == "れい"
    assert m.move_call.enabled and m.move_call.text == "次の試合場へ"
    assert m.end_call.enabled and m.extra_call.text == "もう一枚読みます"
    over = with_match_overrides(m, {"end_call": {"enabled": False}})
    assert not over.end_call.enabled and over.end_call.text == "ありがとうございました"
