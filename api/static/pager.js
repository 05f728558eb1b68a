/* Pages for a projector: sections flowed into columns as tall as the screen, as many columns
   side by side as fit, one page at a time, turning by itself. Nothing is cut off and nothing
   is left out: a section taller than a column goes on in the next column under its heading
   again (continued), and every page comes round in turn.

   A section is described, not built, so that it can be laid out again (new data, a resize):
     { key, head(continued) -> Node,
       parts() -> [Node | { box() -> { node, slot }, items: [Node] }] }
   A box is what its items go into (a table and its tbody, a list with its heading); a box cut
   between two columns is drawn again, heading and all, where it goes on. */
"use strict";

(function () {
  const fits = (col) => col.scrollHeight <= col.clientHeight + 1;

  function section(spec, continued) {
    const s = document.createElement("section");
    s.className = "block";
    s.dataset.block = spec.key;
    if (continued) s.dataset.continued = "true";
    s.append(spec.head(continued));
    return s;
  }

  function whole(spec) {
    const s = section(spec, false);
    for (const part of spec.parts()) {
      if (!part.box) { s.append(part); continue; }
      const b = part.box();
      b.slot.append(...part.items);
      s.append(b.node);
    }
    return s;
  }

  /** Lay `specs` out in columns inside `stage` (already sized); returns the columns. `stack`:
      a section may start under another in the same column (else each starts a column). */
  function flow(stage, specs, stack, limit = Infinity) {
    const cols = [];
    const column = () => {
      const c = document.createElement("div");
      c.className = "col";
      stage.append(c);
      cols.push(c);
      return c;
    };
    let col = column();
    for (const spec of specs) {
      if (cols.length > limit) return null;
      const w = whole(spec);
      if (col.childElementCount && !stack) col = column();
      if (col.childElementCount) {
        col.append(w);
        if (fits(col)) continue;
        w.remove();
        col = column();
      }
      col.append(w);
      if (fits(col)) continue;
      w.remove();
      // too tall for a column: part by part, going on in the next column when one is full
      let sec = section(spec, false);
      let fresh = true;  // nothing but the heading in this column yet
      col.append(sec);
      const goOn = () => {
        col = column();
        sec = section(spec, true);
        col.append(sec);
        fresh = true;
      };
      for (const part of spec.parts()) {
        if (!part.box) {
          sec.append(part);
          if (!fits(col) && !fresh) { part.remove(); goOn(); sec.append(part); }
          fresh = false;
          continue;
        }
        // as many items as fit in this column (found by halving: a few layouts a column,
        // not one an item), the rest in the next under the box's heading again
        const items = part.items;
        let i = 0;
        while (i < items.length) {
          const b = part.box();
          sec.append(b.node);
          const put = (k) => { b.slot.append(...items.slice(i, i + k)); return fits(col); };
          const take = (k) => { for (const it of items.slice(i, i + k)) it.remove(); };
          let k = items.length - i;
          if (!put(k)) {
            take(k);
            let lo = 0;
            let hi = k - 1;
            while (lo < hi) {
              const mid = Math.ceil((lo + hi) / 2);
              const ok = put(mid);
              take(mid);
              if (ok) lo = mid; else hi = mid - 1;
            }
            // nothing fits under what is there: go on; an item too tall for a whole column
            // stays where it is (there is nowhere better)
            k = lo || (fresh ? 1 : 0);
            if (k) put(k);
          }
          if (!k) b.node.remove();
          i += k;
          if (k) fresh = false;
          if (i < items.length) goOn();
        }
      }
    }
    if (!cols[cols.length - 1].childElementCount && cols.length > 1) cols.pop().remove();
    return cols.length > limit ? null : cols;
  }

  class Pager {
    /** `stage`: the element the columns go in; `indicator`: where "1 / 3" is shown;
        `seconds`: how long a page stays; `minColumnRem`: the narrowest column. */
    constructor(stage, indicator, { seconds = 10, minColumnRem = 30, label = null } = {}) {
      this.stage = stage;
      this.indicator = indicator;
      this.seconds = seconds;
      this.minColumnRem = minColumnRem;
      this.label = label || ((n, total) => `${n} / ${total}`);
      this.page = 0;
      this.pages = [];
      this.timer = setInterval(() => this.turn(1), seconds * 1000);
    }

    lay(specs) {
      const st = this.stage;
      const css = getComputedStyle(st);
      const gap = parseFloat(css.columnGap) || 0;
      const width = st.clientWidth - parseFloat(css.paddingLeft) - parseFloat(css.paddingRight);
      const rem = parseFloat(getComputedStyle(document.documentElement).fontSize);
      const n = Math.max(1, Math.floor((width + gap) / (this.minColumnRem * rem + gap)));
      st.style.setProperty("--cols", String(n));
      // side by side while they fit on one page; under one another where that saves pages
      st.replaceChildren();
      let cols = flow(st, specs, false, n);
      if (!cols) {
        st.replaceChildren();
        cols = flow(st, specs, true);
      }
      this.pages = [];
      for (let i = 0; i < cols.length; i += n) this.pages.push(cols.slice(i, i + n));
      this.page = Math.min(this.page, this.pages.length - 1);
      this.show();
    }

    turn(step) {
      if (this.pages.length < 2) return;
      this.page = (this.page + step + this.pages.length) % this.pages.length;
      this.show();
    }

    show() {
      this.pages.forEach((cols, i) => cols.forEach((c) => { c.hidden = i !== this.page; }));
      const total = this.pages.length;
      this.stage.dataset.page = String(this.page + 1);
      this.stage.dataset.pages = String(total);
      this.indicator.hidden = total < 2;
      const keys = [...new Set(this.pages[this.page].flatMap((c) =>
        [...c.querySelectorAll("section.block")].map((s) => s.dataset.block)))];
      this.indicator.replaceChildren(this.label(this.page + 1, total, keys));
    }

    stop() {
      clearInterval(this.timer);
      this.stage.style.removeProperty("--cols");
      delete this.stage.dataset.page;
      delete this.stage.dataset.pages;
      this.indicator.hidden = true;
    }
  }

  window.Y.Pager = Pager;
})();
