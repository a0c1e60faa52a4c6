// The escaping of the Go package internal/textsafe, for the dashboard:
// what an agent wrote is shown with every hidden character (controls,
// line breaks, bidi and zero-width marks, other invisible characters)
// written as an escape, so that the page shows all the text holds. A
// test runs this copy in Chromium against the Go one.
'use strict';
window.fleetstateText = (function () {
  // Hidden as textsafe.Hidden says: not a letter, mark, number,
  // punctuation or symbol (the ASCII space aside), or default-ignorable.
  const hidden = /^(?:[\p{C}\p{Z}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}])$/u;

  function hex(n, width) { return n.toString(16).padStart(width, '0'); }

  // escape is textsafe.Escape: reversible, one line, nothing hidden.
  function escape(s) { return escapeAs(s, false); }

  // escapeText is textsafe.EscapeText, for prose and for a diff: line
  // breaks and tabs stay, backslashes are not doubled, every other hidden
  // character is escaped.
  function escapeText(s) { return escapeAs(s, true); }

  function escapeAs(s, prose) {
    let out = '';
    for (const ch of s || '') {
      const c = ch.codePointAt(0);
      if (prose && (ch === '\n' || ch === '\t')) out += ch;
      else if (ch === '\\') out += prose ? '\\' : '\\\\';
      else if (!prose && ch === '\n') out += '\\n';
      else if (!prose && ch === '\t') out += '\\t';
      else if (!prose && ch === '\r') out += '\\r';
      else if (ch !== ' ' && hidden.test(ch)) out += c > 0xffff ? '\\U' + hex(c, 8) : '\\u' + hex(c, 4);
      else out += ch;
    }
    return out;
  }

  // cut is textsafe.Cut: the first n characters of escape(s), never half
  // an escape, and how many it left out.
  function cut(s, n) {
    const e = [...escape(s)];
    if (e.length <= n) return { head: e.join(''), rest: 0 };
    let i = 0;
    for (;;) {
      let w = 1;
      if (e[i] === '\\') w = ({ x: 4, u: 6, U: 10 })[e[i + 1]] || 2;
      if (i + w > n) break;
      i += w;
    }
    return { head: e.slice(0, i).join(''), rest: e.length - i };
  }

  // mark is textsafe.Mark.
  function mark(rest) {
    return rest === 1 ? '… (+1 more character)' : '… (+' + rest + ' more characters)';
  }

  // clip is textsafe.Clip.
  function clip(s, n) {
    const c = cut(s, n);
    return c.rest ? c.head + mark(c.rest) : c.head;
  }

  // quote is textsafe.Quote.
  function quote(s, n) {
    const c = cut(s, n);
    return '"' + c.head + '"' + (c.rest ? mark(c.rest) : '');
  }

  return { escape, escapeText, cut, mark, clip, quote };
})();
