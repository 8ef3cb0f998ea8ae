/*
 * A small Markdown renderer that is safe by construction: it never parses HTML. Every element
 * is made with document.createElement and every piece of model text goes in through a text
 * node, so `<script>` or `<img onerror=…>` in model output can only ever appear as text.
 * Link targets are limited to http(s), mailto, `entity:<id or key>` and `passage:<id>`.
 *
 * Supported: headings, paragraphs (single newlines become line breaks), fenced and indented-free
 * code blocks, inline code, **bold**, *italic*, ~~strike~~, [links](…), <autolinks>, bare URLs,
 * nested bullet and numbered lists, block quotes, horizontal rules and GFM pipe tables.
 *
 * This ES module exports render(source, {entityNames, passages}), which returns a DocumentFragment.
 * `entityNames` (a Map from a lower-cased entity name to {id, name, type}) turns plain-text
 * mentions of those entities into entity links. Entity links are
 * <a class="entity-link" data-entity-id="…">; the page handles clicks. Passage links (a cited passage
 * of a document) are <a class="passage-link" data-passage-id="…">, titled with the document's name
 * and a snippet when `passages` (a Map from a passage id to its citation) knows it.
 */

import { el } from "./el.js";

const SAFE_URL = /^(https?:\/\/|mailto:)/i;
const ENTITY_URL = /^entity:([^\s()]{1,200})$/;
const PASSAGE_URL = /^passage:([^\s()]{1,200})$/;


function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/* ---------- entity name matching ---------- */

function nameMatcher(entityNames) {
  if (!entityNames || entityNames.size === 0) return null;
  const names = Array.from(entityNames.keys())
    .filter((n) => n.length >= 3)
    .sort((a, b) => b.length - a.length)
    .slice(0, 300);
  if (names.length === 0) return null;
  // Word-ish boundaries that also work for names with punctuation or non-Latin letters.
  return new RegExp("(^|[^\\p{L}\\p{N}_])(" + names.map(escapeRegExp).join("|") + ")(?![\\p{L}\\p{N}_])", "giu");
}

function entityLink(ref, label) {
  const a = el("a", "entity-link");
  a.href = "#entity-" + encodeURIComponent(ref);
  a.dataset.entityId = ref;
  a.title = "Show this entity";
  if (typeof label === "string") a.textContent = label;
  return a;
}

function passageLink(id, passages) {
  const a = el("a", "passage-link");
  a.href = "#passage-" + encodeURIComponent(id);
  a.dataset.passageId = id;
  const cited = passages && passages.get(id);
  a.title = cited ? `${cited.name}${cited.page ? ", page " + cited.page : ""}: ${cited.snippet || ""}` : "A passage of a document";
  return a;
}

/* ---------- inline ---------- */

class Inline {
  constructor(ctx) {
    this.ctx = ctx;
  }

  text(parent, s, inLink) {
    if (!s) return;
    const re = this.ctx.matcher;
    if (!re || inLink) {
      parent.appendChild(document.createTextNode(s));
      return;
    }
    re.lastIndex = 0;
    let last = 0;
    let m;
    while ((m = re.exec(s)) !== null) {
      const start = m.index + m[1].length;
      const entity = this.ctx.entityNames.get(m[2].toLowerCase());
      if (!entity) continue;
      if (start > last) parent.appendChild(document.createTextNode(s.slice(last, start)));
      const a = entityLink(entity.id, m[2]);
      a.classList.add("entity-mention");
      parent.appendChild(a);
      last = start + m[2].length;
      if (m[0].length === 0) re.lastIndex++;
    }
    if (last < s.length) parent.appendChild(document.createTextNode(s.slice(last)));
  }

  render(parent, s, inLink) {
    let buf = "";
    const flush = () => {
      this.text(parent, buf, inLink);
      buf = "";
    };
    let i = 0;
    while (i < s.length) {
      const c = s[i];
      const rest = s.slice(i);
      let m;
      if (c === "\\" && i + 1 < s.length && /[\\`*_{}[\]()#+\-.!|~<>]/.test(s[i + 1])) {
        buf += s[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        flush();
        parent.appendChild(document.createElement("br"));
        i += 1;
        continue;
      }
      if (c === "`" && (m = /^(`+)([\s\S]*?[^`])\1(?!`)/.exec(rest))) {
        flush();
        parent.appendChild(el("code", null, m[2].replace(/^ ([\s\S]*) $/, "$1")));
        i += m[0].length;
        continue;
      }
      if (c === "[" && !inLink && (m = /^\[((?:\\.|[^\]\\])+)\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+"[^"]*")?\s*\)/.exec(rest))) {
        flush();
        this.link(parent, m[1], m[2]);
        i += m[0].length;
        continue;
      }
      if (c === "<" && (m = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/i.exec(rest))) {
        flush();
        this.link(parent, null, m[1]);
        i += m[0].length;
        continue;
      }
      if (!inLink && (c === "h" || c === "H") && /[^\p{L}\p{N}]$|^$/u.test(s.slice(Math.max(0, i - 1), i)) &&
          (m = /^https?:\/\/[^\s<>"'`]+/i.exec(rest))) {
        let url = m[0].replace(/[.,;:!?*_~]+$/, "");
        // Keep a closing bracket only when the URL opened one.
        while (url.endsWith(")") && (url.match(/\(/g) || []).length < (url.match(/\)/g) || []).length) {
          url = url.slice(0, -1);
        }
        flush();
        this.link(parent, null, url);
        i += url.length;
        continue;
      }
      if ((c === "*" || c === "_" || c === "~") && (m = this.emphasis(s, i))) {
        flush();
        const node = el(m.tag);
        this.render(node, m.inner, inLink);
        parent.appendChild(node);
        i = m.end;
        continue;
      }
      buf += c;
      i += 1;
    }
    flush();
  }

  emphasis(s, i) {
    const c = s[i];
    const double = s[i + 1] === c;
    if (c === "~" && !double) return null;
    const delim = double ? c + c : c;
    const after = s[i + delim.length];
    if (after === undefined || /\s/.test(after) || after === c) return null;
    if (c === "_" && i > 0 && /[\p{L}\p{N}]/u.test(s[i - 1])) return null;
    let j = i + delim.length;
    while (j < s.length) {
      const k = s.indexOf(delim, j);
      if (k < 0) return null;
      const ok =
        k > i + delim.length &&
        !/\s/.test(s[k - 1]) &&
        (double || s[k + 1] !== c) &&
        !(c === "_" && k + 1 < s.length && /[\p{L}\p{N}]/u.test(s[k + delim.length] || ""));
      if (s[k - 1] === "\\") {
        j = k + 1;
        continue;
      }
      if (ok) {
        const tag = c === "~" ? "del" : double ? "strong" : "em";
        return { tag, inner: s.slice(i + delim.length, k), end: k + delim.length };
      }
      j = k + 1;
    }
    return null;
  }

  link(parent, label, url) {
    const entity = ENTITY_URL.exec(url);
    const passage = PASSAGE_URL.exec(url);
    let a;
    if (entity) {
      a = entityLink(decodeURIComponent(entity[1]));
    } else if (passage) {
      a = passageLink(decodeURIComponent(passage[1]), this.ctx.passages);
    } else if (SAFE_URL.test(url)) {
      a = el("a", "external-link");
      a.href = url;
      a.target = "_blank";
      a.rel = "noopener noreferrer nofollow";
    } else {
      // Anything else (javascript:, data:, relative paths) is shown as its text only.
      this.render(parent, label === null ? url : label, true);
      return;
    }
    if (label === null) a.textContent = url;
    else this.render(a, label, true);
    parent.appendChild(a);
  }
}

/* ---------- blocks ---------- */

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const HR = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*)|\s*$)/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && s[i + 1] === "|") {
      cur += "|";
      i++;
    } else if (s[i] === "|") {
      cells.push(cur.trim());
      cur = "";
    } else {
      cur += s[i];
    }
  }
  cells.push(cur.trim());
  return cells;
}

function startsBlock(line, next) {
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    HR.test(line) ||
    QUOTE.test(line) ||
    LIST_ITEM.test(line) ||
    (line.includes("|") && next !== undefined && TABLE_SEP.test(next) && next.includes("-"))
  );
}

class Blocks {
  constructor(ctx) {
    this.ctx = ctx;
    this.inline = new Inline(ctx);
  }

  render(parent, lines, depth) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (/^\s*$/.test(line)) {
        i++;
        continue;
      }
      if ((m = FENCE.exec(line))) {
        const fence = m[1];
        const body = [];
        i++;
        while (i < lines.length && !new RegExp("^ {0,3}" + escapeRegExp(fence[0]) + "{" + fence.length + ",}\\s*$").test(lines[i])) {
          body.push(lines[i]);
          i++;
        }
        i++;
        const pre = el("pre", "code-block");
        const code = el("code", null, body.join("\n"));
        if (m[2]) {
          code.dataset.language = m[2].slice(0, 30);
          pre.dataset.language = m[2].slice(0, 30);
        }
        pre.appendChild(code);
        parent.appendChild(pre);
        continue;
      }
      if ((m = HEADING.exec(line))) {
        const h = el("h" + Math.min(6, m[1].length + 2));
        h.className = "md-h" + m[1].length;
        this.inline.render(h, m[2] || "", false);
        parent.appendChild(h);
        i++;
        continue;
      }
      if (HR.test(line)) {
        parent.appendChild(el("hr"));
        i++;
        continue;
      }
      if (QUOTE.test(line)) {
        const body = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
          body.push(m[1]);
          i++;
        }
        const q = el("blockquote");
        if (depth < 8) this.render(q, body, depth + 1);
        else this.inline.render(q, body.join("\n"), false);
        parent.appendChild(q);
        continue;
      }
      if ((m = LIST_ITEM.exec(line))) {
        i = this.list(parent, lines, i, depth);
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("-")) {
        i = this.table(parent, lines, i);
        continue;
      }
      const para = [line.trim()];
      i++;
      while (i < lines.length && !/^\s*$/.test(lines[i]) && !startsBlock(lines[i], lines[i + 1])) {
        para.push(lines[i].trim());
        i++;
      }
      const p = el("p");
      this.inline.render(p, para.join("\n"), false);
      parent.appendChild(p);
    }
  }

  list(parent, lines, i, depth) {
    const first = LIST_ITEM.exec(lines[i]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const list = el(ordered ? "ol" : "ul");
    if (ordered) {
      const start = parseInt(first[2], 10);
      if (start !== 1) list.start = start;
    }
    let loose = false;
    const items = [];
    while (i < lines.length) {
      const m = LIST_ITEM.exec(lines[i]);
      if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
      const contentIndent = indent + m[2].length + 1;
      const body = [m[3] || ""];
      i++;
      while (i < lines.length) {
        const line = lines[i];
        if (/^\s*$/.test(line)) {
          // A blank line continues the item only when indented content follows.
          const next = lines[i + 1];
          if (next !== undefined && /^\s*$/.test(next) === false && next.search(/\S/) >= contentIndent - 1 && next.search(/\S/) > indent) {
            body.push("");
            loose = true;
            i++;
            continue;
          }
          break;
        }
        const lead = line.search(/\S/);
        const sub = LIST_ITEM.exec(line);
        if (sub && sub[1].length <= indent) break;
        if (lead <= indent && startsBlock(line, lines[i + 1])) break;
        body.push(lead >= contentIndent ? line.slice(contentIndent) : line.slice(Math.min(lead, Math.max(indent + 1, 0))));
        i++;
      }
      items.push(body);
      if (i < lines.length && /^\s*$/.test(lines[i])) {
        const next = lines[i + 1];
        const nm = next !== undefined ? LIST_ITEM.exec(next) : null;
        if (nm && nm[1].length === indent && /\d/.test(nm[2]) === ordered) {
          loose = true;
          i++;
        }
      }
    }
    for (const body of items) {
      const li = el("li");
      const hasBlocks = body.some((l, k) => k > 0 && (LIST_ITEM.test(l) || FENCE.test(l) || QUOTE.test(l) || /^\s*$/.test(l)));
      if (!loose && !hasBlocks) {
        this.inline.render(li, body.map((l) => l.trim()).join("\n"), false);
      } else if (depth < 8) {
        this.render(li, body, depth + 1);
      } else {
        this.inline.render(li, body.join("\n"), false);
      }
      list.appendChild(li);
    }
    parent.appendChild(list);
    return i;
  }

  table(parent, lines, i) {
    const header = splitRow(lines[i]);
    const aligns = splitRow(lines[i + 1]).map((c) =>
      c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""
    );
    i += 2;
    const wrap = el("div", "table-wrap");
    const table = el("table");
    const thead = el("thead");
    const hr = el("tr");
    header.forEach((cell, k) => {
      const th = el("th");
      th.scope = "col";
      if (aligns[k]) th.style.textAlign = aligns[k];
      this.inline.render(th, cell, false);
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    table.appendChild(thead);
    const tbody = el("tbody");
    while (i < lines.length && lines[i].includes("|") && !/^\s*$/.test(lines[i])) {
      const cells = splitRow(lines[i]);
      const tr = el("tr");
      for (let k = 0; k < header.length; k++) {
        const td = el("td");
        if (aligns[k]) td.style.textAlign = aligns[k];
        this.inline.render(td, cells[k] || "", false);
        tr.appendChild(td);
      }
      tbody.appendChild(tr);
      i++;
    }
    table.appendChild(tbody);
    wrap.appendChild(table);
    parent.appendChild(wrap);
    return i;
  }
}

function render(source, options) {
  const opts = options || {};
  const ctx = {
    entityNames: opts.entityNames || null,
    matcher: nameMatcher(opts.entityNames),
    passages: opts.passages || null,
  };
  const fragment = document.createDocumentFragment();
  const text = String(source == null ? "" : source).replace(/\r\n?/g, "\n").replace(/\t/g, "    ");
  new Blocks(ctx).render(fragment, text.split("\n"), 0);
  return fragment;
}

export { render };
