"""The desk's paper: a round's pairings (by mat, and every player's mat by name: rule 18's move)
and the standings, as A4 pages in Japanese with large type, one block a page. Plain HTML and
CSS printed from the browser; nothing fetched from outside. Paper is pinned on walls and worn
(名札): the players' clubs (schools) and grades are printed only where the organiser publishes
them (`Settings.publish_details`), as in the public view."""

from __future__ import annotations

import base64
import hashlib
from html import escape

from desk.model import Player, Round, Tournament
from desk.standings import final_places, outcomes, standings
from desk.tournament import block_mats
from desk.views import details_shown, final_lottery_view, next_mats

COLOUR_JA = {"blue": "青", "pink": "桃", "yellow": "黄", "green": "緑", "orange": "橙"}
OUTCOME_JA = {"win": "勝", "draw": "分", "loss": "負"}

STYLE = """
@page { size: A4; margin: 12mm 12mm 14mm; }
* { box-sizing: border-box; }
body { font-family: "Noto Sans CJK JP", "Noto Sans JP", "Hiragino Sans", "Yu Gothic",
       sans-serif; font-size: 15pt; color: #000; margin: 0; }
section { page-break-after: always; break-after: page; }
section:last-child { page-break-after: auto; break-after: auto; }
h1 { font-size: 24pt; margin: 0 0 2mm; }
h2 { font-size: 20pt; margin: 0 0 4mm; }
.sub { font-size: 12pt; color: #333; margin-bottom: 5mm; }
table { width: 100%; border-collapse: collapse; margin-bottom: 6mm; }
th, td { border: 0.4mm solid #000; padding: 2mm 3mm; text-align: left; vertical-align: middle; }
th { background: #eee; font-size: 12pt; }
td.num, th.num { text-align: center; width: 1%; white-space: nowrap; }
td.mat { font-size: 22pt; font-weight: bold; text-align: center; width: 18mm; }
.kana { font-size: 10pt; color: #333; display: block; }
.club { font-size: 11pt; color: #333; }
.vs { text-align: center; width: 10mm; font-size: 12pt; }
.moves { columns: 2; column-gap: 8mm; font-size: 14pt; }
.moves div { break-inside: avoid; padding: 1mm 0; border-bottom: 0.2mm solid #999; }
.moves b { float: right; font-size: 16pt; }
.place { font-weight: bold; }
.slips { display: grid; grid-template-columns: 1fr 1fr; gap: 0; }
.slip { border: 0.3mm dashed #555; padding: 4mm; height: 66mm; overflow: hidden;
        break-inside: avoid; font-size: 12pt; }
.slip .head { display: flex; justify-content: space-between; font-size: 11pt; }
.slip .matno { font-size: 26pt; font-weight: bold; }
.slip table { margin: 2mm 0; }
.slip td { padding: 1.5mm 2mm; }
.slip td.box { width: 22mm; text-align: right; }
.slip .sign { margin-top: 2mm; font-size: 11pt; }
.cards { display: grid; grid-template-columns: 1fr 1fr; gap: 0; }
.card { border: 0.3mm dashed #555; height: 67mm; padding: 5mm; text-align: center;
        break-inside: avoid; overflow: hidden; }
.card .big { font-size: 30pt; font-weight: bold; margin: 3mm 0; }
.card .label { font-size: 72pt; font-weight: bold; line-height: 1; margin: 4mm 0; }
.cert { text-align: center; padding-top: 30mm; }
.cert h1 { font-size: 48pt; letter-spacing: 0.5em; margin-bottom: 20mm; }
.cert .award { font-size: 26pt; margin-bottom: 12mm; }
.cert .who { font-size: 34pt; margin-bottom: 20mm; }
.cert .text { font-size: 18pt; line-height: 1.8; text-align: left; margin: 0 20mm 20mm; }
.cert .when { font-size: 16pt; }
@media screen { body { max-width: 210mm; margin: 0 auto; padding: 8mm; }
                section { border-bottom: 2px dashed #999; margin-bottom: 10mm; } }
"""


# the pages' policy (api.guards gives other pages theirs): nothing but this very style sheet,
# inline so that a saved page prints the same, allowed by its hash; no script, no framing
CSP = ("default-src 'none'; style-src 'sha256-"
       + base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
       + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _doc(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="ja"><head><meta charset="utf-8">'
            f'<title>{escape(title)}</title><style>{STYLE}</style></head><body>{body}'
            "</body></html>")


def _name(p: Player | None) -> str:
    if p is None:
        return "?"
    kana = f'<span class="kana">{escape(p.furigana)}</span>' if p.furigana else ""
    return f"{kana}{escape(p.name)}"


def round_title(t: Tournament, r: Round) -> str:
    return "決勝戦" if r.final else f"第{r.number}試合"


def _club(t: Tournament, p: Player | None) -> str:
    return escape(p.club) if p is not None and details_shown(t, public=True) else ""


def round_page(t: Tournament, number: int) -> str:
    sections = []
    for r in sorted((r for r in t.rounds if r.number == number), key=lambda r: r.block):
        rows = []
        for m in r.matches:
            cells = []
            res = outcomes(m.players, m.result, r.final) if m.result else {}
            for i, no in enumerate(m.players):
                p = t.player(no)
                score = ""
                if m.result is not None:
                    score = f" <b>{m.result.cards[i]}枚 {OUTCOME_JA[res[no].value]}</b>"
                cells.append(f'<td>{_name(p)} <span class="club">{_club(t, p)}'
                             f"</span>{score}</td>")
            if len(cells) == 3:
                rest = f'{cells[1]}<td class="vs">対</td>{cells[2]}'
            else:
                rest = cells[1].replace("<td>", '<td colspan="3">', 1)
            rows.append(f'<tr><td class="mat">{m.mat}</td>{cells[0]}<td class="vs">対</td>'
                        f"{rest}</tr>")
        moves = next_mats(t, r.block) if t.rounds_of(r.block)[-1].number == number else None
        move_html = ""
        if moves is not None:
            items = "".join(f"<div>{escape(s['name'])} <b>マット {s['mat']}</b></div>"
                            for s in moves["seats"])
            move_html = f'<h2>移動（名前順）</h2><div class="moves">{items}</div>'
        colour = COLOUR_JA.get(r.colour, r.colour)
        sections.append(
            f"<section><h1>{escape(t.name)} {round_title(t, r)}</h1>"
            f'<div class="sub">{escape(t.day)}　{escape(r.block)}ブロック　札の色: {colour}　'
            f"読む枚数: {t.settings.cards}枚</div>"
            '<table><thead><tr><th class="num">マット</th>'
            '<th colspan="5">対戦（3人の組は上位2名が勝ち）</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>{move_html}</section>")
    title = "決勝戦" if number == t.final_round else f"第{number}試合"
    return _doc(f"{t.name} {title}", "".join(sections))


def standings_page(t: Tournament) -> str:
    details = details_shown(t, public=True)

    def club_cell(p: Player | None) -> str:
        return f'<td class="club">{_club(t, p)}</td>' if details else ""

    sections = []
    for b in t.blocks:
        places = final_places(t, b.name)
        rows = []
        for s in standings(t, b.name):
            p = t.player(s.no)
            place = {1: "優勝", 2: "準優勝"}.get(places.get(s.no, 0), "")
            mark = "（抽選）" if s.by_lottery else ""
            withdrawn = "（棄権）" if s.withdrawn else ""
            rows.append(
                f'<tr><td class="num">{s.rank}</td><td>{_name(p)}{withdrawn}</td>'
                f"{club_cell(p)}"
                f'<td class="num">{s.wins}</td><td class="num">{s.draws}</td>'
                f'<td class="num">{s.losses}</td><td class="num">{s.cards}</td>'
                f'<td class="num">{s.lottery}{mark}</td><td class="place">{place}</td></tr>')
        played = len([r for r in t.rounds_of(b.name) if not r.final])
        drawn = final_lottery_view(t, b.name)
        note = ""
        if drawn is not None:
            went, left = ("・".join(x["name"] for x in drawn[k]) for k in ("drawn", "left"))
            where = "決勝へ" if t.settings.finalists == 2 else "1位（優勝）"
            note = (f'<p class="sub">{"決勝進出" if t.settings.finalists == 2 else "1位"}は抽選'
                    f'で決定: {escape(went)} が{where}（{escape(left)}'
                    f' と勝ち数 {drawn["wins"]}・取り札 {drawn["cards"]} が同じ）</p>')
        sections.append(
            f"<section><h1>{escape(t.name)} 成績</h1>"
            f'<div class="sub">{escape(t.day)}　{escape(b.name)}ブロック　予選 {played} / '
            f"{t.settings.rounds} 試合　順位: 勝ち数、取り札数、抽選（シード {t.lottery_seed}）"
            "</div>"
            '<table><thead><tr><th class="num">順位</th><th>名前</th>'
            f'{"<th>所属</th>" if details else ""}'
            '<th class="num">勝</th><th class="num">分</th><th class="num">負</th>'
            '<th class="num">取り札</th><th class="num">抽選</th>'
            f'<th>{"決勝" if t.settings.finalists == 2 else "入賞"}</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>{note}</section>")
    return _doc(f"{t.name} 成績", "".join(sections) or "<p>ブロックがまだありません</p>")


def _per_page(items: list[str], n: int, wrap: str) -> str:
    """`items` laid out `n` a page, each page one section (cut along the dashed lines)."""
    pages = [items[i:i + n] for i in range(0, len(items), n)]
    return "".join(f'<section><div class="{wrap}">{"".join(p)}</div></section>' for p in pages)


def slips_page(t: Tournament, number: int) -> str:
    """Rule 17 on paper: a results slip per mat of round `number` (eight an A4 page), for the
    referee to fill in and bring to the desk: the mat, the block, the colour, each player with
    a box for the cards taken, the referee's signature."""
    slips = []
    for r in sorted((r for r in t.rounds if r.number == number), key=lambda r: r.block):
        colour = COLOUR_JA.get(r.colour, r.colour)
        for m in r.matches:
            rows = "".join(
                f"<tr><td>{_name(t.player(no))}</td><td class=\"box\">枚</td></tr>"
                for no in m.players)
            tie = ("<div class=\"sign\">同数のとき、もう一枚を取った人: ________</div>"
                   if r.final else "")
            slips.append(
                f'<div class="slip" data-mat="{m.mat}"><div class="head"><span>'
                f"{escape(t.name)}　{round_title(t, r)}　{escape(r.block)}ブロック　{colour}"
                f'</span><span class="matno">マット {m.mat}</span></div>'
                f"<table><tbody>{rows}</tbody></table>{tie}"
                f'<div class="sign">読んだ枚数 {t.settings.cards + r.extra_cards} 枚　'
                "審判の署名 ______________</div></div>")
    title = "決勝戦" if number == t.final_round else f"第{number}試合"
    return _doc(f"{t.name} {title} 結果票", _per_page(slips, 8, "slips")
                or "<p>この試合はまだ組まれていません</p>")


def names_page(t: Tournament) -> str:
    """名札: a card per player still in (eight an A4 page): the name large, its reading, the
    entry number and the block; the club and the grade where the organiser publishes them."""
    details = details_shown(t, public=True)
    cards = [
        f'<div class="card" data-no="{p.no}"><div class="kana">{escape(p.furigana)}</div>'
        f'<div class="big">{escape(p.name)}</div><div class="club">{_club(t, p)}'
        f"{'　' + escape(p.grade) + '年' if p.grade and details else ''}</div>"
        f'<div class="sub">{p.no} 番{"　" + escape(p.block) + "ブロック" if p.block else ""}'
        "</div></div>"
        for p in t.players if p.withdrawn_round is None]
    return _doc(f"{t.name} 名札", _per_page(cards, 8, "cards") or "<p>参加者がいません</p>")


def mats_page(t: Tournament) -> str:
    """Mat labels (four an A4 page): each block's mats, the number large, the block and its
    first round's colour."""
    labels = []
    for b in t.blocks:
        colour = COLOUR_JA.get(b.colour(1), b.colour(1))
        labels += [f'<div class="card" data-mat="{m}"><div class="sub">マット</div>'
                   f'<div class="label">{m}</div><div class="big">{escape(b.name)}ブロック'
                   f"　{colour}</div></div>" for m in block_mats(t)[b.name]]
    return _doc(f"{t.name} マット番号", _per_page(labels, 4, "cards")
                or "<p>ブロックがまだありません</p>")


def certificates_page(t: Tournament) -> str:
    """賞状: for each block whose final is played, the winner's (優勝) and the runner-up's
    (準優勝), one an A4 page."""
    pages = []
    for b in t.blocks:
        places = final_places(t, b.name)
        for no, place in sorted(places.items(), key=lambda x: x[1]):
            p = t.player(no)
            if p is None or place not in (1, 2):
                continue
            award = "優勝" if place == 1 else "準優勝"
            pages.append(
                f'<section class="cert" data-no="{no}"><h1>賞状</h1>'
                f'<div class="award">{escape(b.name)}ブロック　{award}</div>'
                f'<div class="who">{escape(p.name)} 殿</div>'
                f'<div class="text">あなたは {escape(t.name)} において頭書の成績を収められ'
                "ました。よってこれを賞します。</div>"
                f'<div class="when">{escape(t.day)}</div></section>')
    return _doc(f"{t.name} 賞状", "".join(pages) or "<p>決勝戦がまだ終わっていません</p>")
