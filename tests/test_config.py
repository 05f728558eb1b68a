"""Bad config values stop start-up with a message that names the key and what is allowed."""

from pathlib import Path

import pytest

from hall.config import Config, load_config, parse_config
from reader.config import with_match_overrides
from reader.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_config_yaml_loads_and_equals_the_defaults():
    cfg = load_config(ROOT / "config.yaml")
    assert cfg.match == Config().match
    assert cfg.match.cards == 17 and cfg.match.memorise_s == 30


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"match": {"cardz": 3}},
         r"match\.cardz: unknown key; did you mean cards\?; allowed keys here: colors, cards"),
        ({"match": {"memorize_s": 3}},
         r"match\.memorize_s: unknown key; did you mean memorise_s\?"),
        ({"match": {"cards": None}},
         r"match\.cards: .* \(got nothing \(the key is empty or null\)\)"),
        ({"mtach": {}}, r"mtach: unknown key; did you mean match\?; allowed keys here: match, "
         r"voice, audio"),
        ({"match": {"cards": 0}}, r"match\.cards: Input should be greater than or equal to 1"),
        ({"match": {"cards": "many"}}, r"match\.cards: Input should be a valid integer"),
        ({"match": {"gaps": {"between_cards_s": -1}}},
         r"match\.gaps\.between_cards_s: Input should be greater than or equal to 0"),
        ({"match": {"gaps": {"betwen_cards_s": 1}}},
         r"match\.gaps\.betwen_cards_s: unknown key; did you mean between_cards_s\?; allowed "
         r"keys here: after_bow_s, after_call_s"),
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
        ({"voice": {"pack_joka_repeat": "maybe"}},
         r"voice\.pack_joka_repeat: Input should be a valid boolean.* \(got 'maybe'\)"),
        ({"voice": {"pack_joka_repeats": True}},
         r"voice\.pack_joka_repeats: unknown key; did you mean pack_joka_repeat\?"),
        ({"server": {"channels": [{"name": "a"}, {"name": "a"}]}},
         r"server\.channels: .*repeated: a"),
        ({"server": {"channels": [{"name": "A B"}]}}, r"server\.channels\.0\.name"),
        ({"server": {"channels": [{"name": "x", "devise": 1}]}},
         r"server\.channels\.0\.devise: unknown key; did you mean device\?; allowed keys "
         r"here: name, device"),
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


def test_presets_and_channel_outputs():
    cfg = load_config(ROOT / "config.yaml")
    assert list(cfg.all_presets()) == ["tournament", "classroom", "beginner"]
    assert cfg.server.channels[0].output == "device" and cfg.server.speakers.lead_ms == 500
    own = parse_config({"presets": {"classroom": {"label": "授業 (短縮)",
                                                  "match": {"memorise_s": 20}},
                                    "drill": {"label": "練習", "voice": {"speed": 0.9}}}})
    ps = own.all_presets()
    assert list(ps) == ["tournament", "classroom", "beginner", "drill"]
    assert ps["classroom"].match == {"memorise_s": 20} and ps["drill"].voice == {"speed": 0.9}
    with pytest.raises(ConfigError, match=r"server\.channels\.0\.output: Input should be "
                                          r"'device', 'browser' or 'both'"):
        parse_config({"server": {"channels": [{"name": "a", "output": "speakers"}]}})
    with pytest.raises(ConfigError, match=r"presets\.x\.match\.gaps\.repeat_s: Input should be"):
        parse_config({"presets": {"x": {"label": "X", "match": {"gaps": {"repeat_s": -1}}}}})
    with pytest.raises(ConfigError, match=r"presets\.x\.voice\.engine: cannot be changed"):
        parse_config({"presets": {"x": {"label": "X", "voice": {"engine": "pack"}}}})


def test_builtin_presets_follow_the_rules_and_slow_down_for_classes():
    from audio.config import with_voice_overrides
    from hall.config import BUILTIN_PRESETS
    from reader.config import with_match_overrides

    base = Config()
    t = with_match_overrides(base.match, BUILTIN_PRESETS["tournament"].match)
    assert (t.memorise_s, t.cards, t.lower_verse_times) == (30, 17, 1)  # rules 5, 16, 7
    c = with_match_overrides(base.match, BUILTIN_PRESETS["classroom"].match)
    b = with_match_overrides(base.match, BUILTIN_PRESETS["beginner"].match)
    assert c.lower_verse_times == b.lower_verse_times == 2 and c.memorise_s == 60
    assert b.gaps.between_cards_s > c.gaps.between_cards_s
    speeds = [with_voice_overrides(base.voice, BUILTIN_PRESETS[k].voice).speed
              for k in ("tournament", "classroom", "beginner")]
    assert speeds == sorted(speeds, reverse=True) and speeds[0] == 1.0


def test_a_call_switched_off_keeps_its_words_and_a_new_text_needs_its_reading():
    move = {"text": "次の試合場へ", "yomi": "つぎのしあいじょうへ"}
    cfg = parse_config({"match": {"bow_call": {"enabled": False}, "move_call": move}})
    m = cfg.match
    assert not m.bow_call.enabled and m.bow_call.text == "礼" and m.bow_call.yomi == "れい"
    assert m.move_call.enabled and m.move_call.text == "次の試合場へ"
    assert m.end_call.enabled and m.extra_call.text == "もう一枚読みます"
    over = with_match_overrides(m, {"end_call": {"enabled": False}})
    assert not over.end_call.enabled and over.end_call.text == "ありがとうございました"


def test_audio_output_null_as_yaml_writes_it(tmp_path):
    """`output: null` is YAML's null (None): it means no sound, as README and config.yaml say."""
    p = tmp_path / "c.yaml"
    p.write_text("audio:\n  output: null\n", "utf-8")
    assert load_config(p).audio.output == "null"
    p.write_text("audio:\n  output: \"null\"\n", "utf-8")
    assert load_config(p).audio.output == "null"
    with pytest.raises(ConfigError, match=r"audio\.output: Input should be 'device' or 'null'"):
        parse_config({"audio": {"output": "speakers"}})


def test_a_bad_broker_url_is_said_without_its_password():
    with pytest.raises(ConfigError) as e:
        parse_config({"cluster": {"bus": "nats://yomite:s3cret-pw@b1:4222,,nats://b2:4222"}})
    assert "cluster.bus" in str(e.value) and "s3cret-pw" not in str(e.value)
    assert "nats://yomite:***@b1:4222" in str(e.value)
