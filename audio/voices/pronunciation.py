"""How Open JTalk is told to say a phrase: the reference kana's morae with the dictionary's accent.

A verse's yomi (`*_yomi`) says exactly which morae a reader says, but fed alone to Open JTalk it
is one unknown katakana noun: every phrase gets the same contour and long vowels come out as two
vowels. The poem's own text (kanji and kana) is what Open JTalk's dictionary knows: its front end
(`pyopenjtalk.run_frontend`, the NJD features) finds the words, their accent phrases and accent
nuclei, and says おう in 逢坂 as one long vowel. So each phrase is analysed from its text and the
dictionary's morae are aligned with the reference's:

- where they agree (long vowels count as agreeing: the dictionary's ー with the reference's う
  after an o-row mora, い after an e-row mora, or the same vowel again), the dictionary's
  pronunciation is kept, ー and all;
- where they differ (the dictionary reads 庵 as アン, the reference says いお), the reference's
  morae replace the dictionary's in the words concerned; if that stretch touches several words
  they become one word, so no accent phrase boundary falls inside it; the accent nucleus moves
  with the mora it was on;
- in such a stretch an う after an o-row mora is a long vowel when the historical kana of the
  poem (`*_kana`) show a vowel change there (あふ → おう, てふ → ちょう, けふ → きょう), and two
  vowels where they do not (おほふ → おおう, かよふ → かよう);
- devoicing marks are set again by Open JTalk's own rule (`set_unvoiced_vowel`).

Where fewer than a third of the reference's morae agree with the dictionary (手向山 read
トーゲサン), the phrase is read from its kana alone, as before, and the caller logs it.
`Reading` carries what a test needs to check the result without synthesising: the words, the
labels, the fallback reason.
"""

import contextlib
import difflib
import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

with contextlib.redirect_stdout(io.StringIO()):  # its import prints (audio/voices/openjtalk.py)
    import pyopenjtalk
    from pyopenjtalk.openjtalk import OpenJTalk

from audio.voices.classical import keep_to_words
from audio.voices.kana import DEVOICED, LONG, morae, vowel

# the vowel kana that lengthens a mora ending in each vowel (おう, えい, and the same vowel)
_LENGTHENS: Final = {"a": "ア", "i": "イ", "u": "ウ", "e": "エイ", "o": "オウ"}
# kana written differently but said the same (を and お, ぢ and じ, づ and ず)
_SAME_SOUND: Final = str.maketrans("ヲヂヅ", "オジズ")
# below this share of the reference's morae found in the dictionary's reading, the alignment is
# guesswork: the phrase is read from its kana alone
MIN_AGREEMENT: Final = 1 / 3

_jtalk: OpenJTalk | None = None
_jtalk_lock = threading.Lock()


def _frontend() -> OpenJTalk:
    """One Open JTalk front end for the process (it serialises its own calls)."""
    global _jtalk
    with _jtalk_lock:
        if _jtalk is None:
            _jtalk = OpenJTalk(dn_mecab=pyopenjtalk.OPEN_JTALK_DICT_DIR)
        return _jtalk


def _canonical(ms: Sequence[str]) -> list[str]:
    """Morae as said, for comparing two readings: a vowel that lengthens the mora before it
    and a ー are the same thing, and so are を/お, ぢ/じ, づ/ず."""
    out: list[str] = []
    prev: str | None = None
    for m in ms:
        m = m.translate(_SAME_SOUND)
        if m == LONG or (prev is not None and len(m) == 1 and m in _LENGTHENS.get(prev, "")):
            out.append(LONG)  # prev stays: ー after a long vowel lengthens the same vowel
        else:
            out.append(m)
            prev = vowel(m)
    return out


@dataclass(frozen=True)
class Word:
    """One word as it is said: its text, its morae, and whether it starts an accent phrase."""

    string: str
    morae: tuple[str, ...]
    starts_phrase: bool
    accent: int  # the accent phrase's nucleus (mora 1..n; 0 flat) when starts_phrase
    replaced: bool  # the reference's morae, not the dictionary's


@dataclass(frozen=True)
class Reading:
    """How one phrase is said. `fallback` says why the kana alone were used (then `words` is
    empty); `agreement` is the share of the reference's morae the dictionary read the same."""

    text: str
    yomi: str
    labels: tuple[str, ...]
    words: tuple[Word, ...]
    dictionary: tuple[Word, ...]  # the dictionary's own analysis of the text
    agreement: float
    fallback: str | None = None

    @property
    def spoken(self) -> str:
        """The morae said, in katakana, with ー for long vowels."""
        return "".join(m for w in self.words for m in w.morae)


def _words(features: Sequence[dict[str, Any]]) -> list[Word]:
    words: list[Word] = []
    for f in features:
        ms = morae(f["pron"])
        if not ms:
            continue
        words.append(Word(f["string"], tuple(ms), f["chain_flag"] != 1 or not words,
                          int(f["acc"]), False))
    return words


def analyse(text: str) -> list[dict[str, Any]]:
    """The dictionary's NJD features of `text`, without punctuation (the yomi's spaces are the
    pauses)."""
    # Sudachi's homograph fix is off: the yomi gives every reading anyway (and it warns)
    feats = pyopenjtalk.run_frontend(text, jtalk=_frontend(), use_sudachi_kanji_yomi=False)
    return [dict(f) for f in feats if morae(f["pron"])]


def dictionary_labels(text: str) -> list[str]:
    """Open JTalk's own labels for `text` (its dictionary's reading and accent), with the same
    front end options `read` uses: what a reading's accent is measured against."""
    return list(pyopenjtalk.extract_fullcontext(text, use_sudachi_kanji_yomi=False,
                                                jtalk=_frontend()))


def read(text: str, yomi: str, kana: str | None = None, *, classical: bool = True) -> Reading:
    """How to say one phrase whose text is `text` and whose pronunciation is `yomi` (kana);
    `kana`, the phrase in historical kana if known, tells long vowels in misread stretches.
    A phrase of the hundred poems begins accent phrases only at its classical words
    (`audio.voices.classical`; `classical=False` keeps the dictionary's cuts, for comparing)."""
    ref = morae(yomi)
    feats = analyse(text)
    dictionary = tuple(_words(feats))
    dict_morae = [m for w in dictionary for m in w.morae]
    ops = _ops(_canonical(dict_morae), _canonical(ref))
    agree = sum(i2 - i1 for op, i1, i2, _, _ in ops if op == "equal")
    agreement = agree / len(ref) if ref else 0.0
    if not dict_morae or agreement < MIN_AGREEMENT:
        why = (f"the dictionary reads {text!r} as {''.join(dict_morae) or 'nothing'}, "
               f"{agreement:.0%} of {yomi!r}")
        return _kana_only(text, yomi, dictionary, agreement, why, kana)
    words = _align(feats, dictionary, ref, ops, kana)
    if classical:
        keep_to_words(words, yomi)
    jtalk = _frontend()
    replaced = [bool(f.pop("_replaced", False)) for f in words]
    voiced = jtalk.set_unvoiced_vowel(words)  # type: ignore[arg-type]
    labels = tuple(jtalk.make_label(voiced))
    said = tuple(
        Word(f["string"], tuple(morae(f["pron"])), f["chain_flag"] != 1 or i == 0,
             int(f["acc"]), replaced[i])
        for i, f in enumerate(voiced)
    )
    return Reading(text, yomi, labels, said, dictionary, agreement)


def _kana_only(
    text: str, yomi: str, dictionary: tuple[Word, ...], agreement: float, why: str,
    kana: str | None,
) -> Reading:
    """Today's path: the yomi alone as katakana read as pronunciation (Open JTalk then says
    exactly those morae), with the long vowels the historical kana show, as one accent phrase
    (the front end would otherwise cut an unknown word anywhere: アシビ|キノ)."""
    ref = morae(yomi)
    long = _long_vowels_from_kana(ref, kana)
    said = "".join(LONG if k in long else m for k, m in enumerate(ref))
    jtalk = _frontend()
    feats = [dict(f) for f in pyopenjtalk.run_frontend(
        said, use_read_as_pron=True, use_sudachi_kanji_yomi=False, jtalk=jtalk)]
    for i, f in enumerate(feats):
        f["chain_flag"] = -1 if i == 0 else 1
    labels = tuple(jtalk.make_label(feats))  # type: ignore[arg-type]
    return Reading(text, yomi, labels, (), dictionary, agreement, fallback=why)


def _ops(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes between two canonical mora lists, with every run of differences as one
    "replace", and a ー that agrees only by itself (its mora before differs: the dictionary's
    ツー against the reference's カヨウ) counted as a difference."""
    raw = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    split: list[tuple[str, int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in raw:
        op = str(tag)
        if op == "equal" and a[i1] == LONG and (not split or split[-1][0] != "equal"):
            split.append(("replace", i1, i1 + 1, j1, j1 + 1))
            i1, j1 = i1 + 1, j1 + 1
            if i1 == i2:
                continue
        split.append((op, i1, i2, j1, j2))
    out: list[tuple[str, int, int, int, int]] = []
    for op, i1, i2, j1, j2 in split:
        if op != "equal" and out and out[-1][0] != "equal":
            _, pi1, _, pj1, _ = out[-1]
            out[-1] = ("replace", pi1, i2, pj1, j2)
        else:
            out.append(("replace" if op != "equal" else op, i1, i2, j1, j2))
    return out


def _long_vowels_from_kana(ref: list[str], kana: str | None) -> set[int]:
    """Indexes of reference morae う said as a long vowel because the historical kana show the
    vowel before them changed (あふ → おう, てふ → ちょう)."""
    if not kana:
        return set()
    hist = morae(kana)
    out: set[int] = set()
    sm = difflib.SequenceMatcher(a=hist, b=ref, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "replace":
            continue
        for k in range(max(j1, 1), j2):
            if ref[k] != "ウ" or vowel(ref[k - 1]) != "o" or k - 1 < j1:
                continue
            off = k - 1 - j1
            before = hist[i1 + off] if i1 + off < i2 else None
            if before is not None and vowel(before) != "o":
                out.add(k)
    return out


def _align(
    feats: list[dict[str, Any]],
    dictionary: tuple[Word, ...],
    ref: list[str],
    ops: list[tuple[str, int, int, int, int]],
    kana: str | None,
) -> list[dict[str, Any]]:
    """The features with the reference's morae: see the module's docstring."""
    # which word each dictionary mora belongs to
    owner = [wi for wi, w in enumerate(dictionary) for _ in w.morae]
    n_words = len(dictionary)
    # group words that a differing stretch touches (a union-find over consecutive words)
    group = list(range(n_words))
    for op, i1, i2, _, _ in ops:
        if op == "equal":
            continue
        lo = owner[i1] if i1 < len(owner) else n_words - 1
        hi = owner[i2 - 1] if i2 > i1 else lo
        if i1 == i2 and i1 > 0 and (i1 == len(owner) or owner[i1 - 1] != owner[i1]):
            lo = hi = owner[i1 - 1]  # an insertion at a word boundary joins the word before
        for wi in range(lo, hi + 1):
            group[wi] = group[lo]
    # the reference morae each dictionary mora becomes, and each mora's index in the reference
    said: list[list[str]] = [[] for _ in dictionary]
    replaced = [False] * n_words
    new_index: list[int | None] = [None] * len(owner)
    long_from_kana = _long_vowels_from_kana(ref, kana)
    dict_morae = [m for w in dictionary for m in w.morae]
    for op, i1, i2, j1, j2 in ops:
        if op == "equal":
            for k in range(i2 - i1):
                said[owner[i1 + k]].append(dict_morae[i1 + k])
                new_index[i1 + k] = j1 + k
            continue
        at = owner[i1] if i1 < len(owner) else n_words - 1
        if i1 == i2 and i1 > 0 and (i1 == len(owner) or owner[i1 - 1] != owner[i1]):
            at = owner[i1 - 1]
        # the morae stay in the word where the stretch starts (so they keep their order when
        # the group's words are joined); the group's first word carries the change
        for k in range(j1, j2):
            said[at].append(LONG if k in long_from_kana else ref[k])
        replaced[group[at]] = True
        for k in range(i1, i2):  # a nucleus on a changed mora keeps its place in the stretch
            new_index[k] = (j1 + (k - i1) * (j2 - j1) // (i2 - i1) if j2 > j1
                            else (j1 - 1 if j1 > 0 else None))
    out: list[dict[str, Any]] = []
    phrase_start_dict = 0  # index in dict morae of the current accent phrase's first mora
    pos = 0
    heads: dict[int, int] = {}  # output word -> dictionary mora index of its phrase start
    for wi, w in enumerate(dictionary):
        if w.starts_phrase:
            phrase_start_dict = pos
        pos += len(w.morae)
        if group[wi] != wi:
            # merged into an earlier word: its text joins that word's
            out[-1]["string"] += feats[wi]["string"]
            out[-1]["pron"] += "".join(said[wi])
            continue
        f = dict(feats[wi])
        f["pron"] = "".join(said[wi]) if replaced[wi] else f["pron"]
        if replaced[wi]:
            f["pron"] = f["pron"].replace(DEVOICED, "")
            f["_replaced"] = True
        if not out:
            f["chain_flag"] = -1
        heads[len(out)] = phrase_start_dict
        out.append(f)
    # a word all of whose morae the reference drops (誓ひてし said ちかいてし) gives its text to
    # the word before (or after), so the words still spell the text
    kept: list[dict[str, Any]] = []
    kept_heads: dict[int, int] = {}
    orphan = ""
    for i, f in enumerate(out):
        if not morae(f["pron"]):
            if kept:
                kept[-1]["string"] += f["string"]
            else:
                orphan += f["string"]
            continue
        if orphan:
            f["string"] = orphan + f["string"]
            orphan = ""
        kept_heads[len(kept)] = heads[i]
        if not kept:
            f["chain_flag"] = -1
        kept.append(f)
    for f in kept:
        f["mora_size"] = len(morae(f["pron"]))
    _move_nuclei(kept, dictionary, kept_heads, new_index)
    return kept


def _move_nuclei(
    out: list[dict[str, Any]],
    dictionary: tuple[Word, ...],
    heads: dict[int, int],
    new_index: list[int | None],
) -> None:
    """Each accent phrase keeps its nucleus on the same mora, counted in the new morae."""
    starts = [i for i, f in enumerate(out) if f["chain_flag"] != 1]
    ref_pos = 0
    ref_start = {}
    for i, f in enumerate(out):
        ref_start[i] = ref_pos
        ref_pos += f["mora_size"]
    for si, i in enumerate(starts):
        end = starts[si + 1] if si + 1 < len(starts) else len(out)
        length = sum(out[k]["mora_size"] for k in range(i, end))
        acc = int(out[i]["acc"])
        if acc <= 0 or length == 0:
            out[i]["acc"] = 0 if length else out[i]["acc"]
            continue
        nucleus = heads[i] + acc - 1
        moved = new_index[nucleus] if nucleus < len(new_index) else None
        if moved is None:
            out[i]["acc"] = min(acc, length)
            continue
        out[i]["acc"] = min(max(1, moved - ref_start[i] + 1), length)


@dataclass(frozen=True)
class Mora:
    phonemes: tuple[str, ...]
    phrase: int  # accent phrase index in the utterance
    high: bool


def label_morae(labels: Sequence[str]) -> list[Mora]:
    """The morae of full-context labels with their accent phrase and high/low pitch, by the
    Tokyo-dialect rule pyopenjtalk's own prosody output uses (type 0: low then high; type 1:
    high then low; type n: low, high up to the nucleus, low after).

    A mora is the run of phonemes sharing the accent phrase (the breath group, field I, and the
    phrase's place in it, F's f5) and the mora's place in that phrase (A's a2)."""
    out: list[Mora] = []
    phrases: dict[tuple[str, str], int] = {}
    key: tuple[str, str, int] | None = None
    for label in labels:
        phoneme = label.split("-", 1)[1].split("+", 1)[0]
        if phoneme in ("sil", "pau"):
            key = None
            continue
        a1, a2, _ = (int(x) for x in label.split("/A:", 1)[1].split("/", 1)[0].split("+"))
        f = label.split("/F:", 1)[1].split("/", 1)[0]
        accent = int(f.split("#", 1)[0].split("_", 1)[1])
        f5 = f.split("@", 1)[1].split("_", 1)[0]
        breath = label.split("/I:", 1)[1].split("/", 1)[0]
        this = (breath, f5, a2)
        if this != key:
            phrase = phrases.setdefault((breath, f5), len(phrases))
            if accent == 0:
                high = a2 >= 2
            elif accent == 1:
                high = a2 == 1
            else:
                high = a2 >= 2 and a1 <= 0
            out.append(Mora((phoneme,), phrase, high))
            key = this
        else:
            last = out[-1]
            out[-1] = Mora((*last.phonemes, phoneme), last.phrase, last.high)
    return out
