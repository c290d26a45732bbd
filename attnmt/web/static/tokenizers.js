// attnmt's tokenizers in the browser: the same tokens as attnmt/tokenize.py, for the exported page.
//
// `createTokenizer(spec)` takes the spec that attnmt/web/tokenizers.py writes (its docstring
// describes the format) and returns {tokenize(text) -> string[], detokenize(tokens) -> string}:
// the word tokenizer's rules, or SentencePiece's bpe or unigram encoding and its decoding.
// tests/test_web_tokenizers.py holds both equal to Python on whole corpora and on fuzzed text.
//
// Where JavaScript and Python differ, Python wins:
// - Python's regex \w, \d and str.isalnum/isdigit are Unicode-wide, JavaScript's \w and \d ASCII;
//   and the browser's Unicode version is not Python's. So the word tokenizer's character
//   classes come in the spec, computed by the Python that made it, and so does the set of
//   characters that Python knows: the others are kept out of NFC and lowercasing, as in Python.
// - Python's (?i) lets "i" match "ı" and "İ", JavaScript's /i does not: the clitic patterns
//   spell out each letter's cases instead.
// - SentencePiece adds scores as float32: sums are rounded with Math.fround.
// Modern JavaScript, no dependencies: an ES module for browsers and Node alike.

const FORMAT = "attnmt-web-tokenizer";
const FORMAT_VERSION = 1;

// tokenize.py's _INVISIBLE, and the characters Python's str.split() splits on (str.isspace:
// JavaScript's \s adds U+FEFF and lacks U+001C-U+001F and U+0085).
const INVISIBLE = /[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u200b\u2060\ufeff]/gu;
const SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const SPACES = new RegExp(`[${SPACE}]+`, "u");

/** attnmt.tokenize.normalize_text: invisible characters dropped, NFC, runs of spaces -> " ",
 * stripped. Given a tokenizer's spec, characters its Python's Unicode version does not know are
 * left out of NFC as Python leaves them; without one, the browser's Unicode version decides. */
export function normalizeText(text, spec = undefined) {
  return unicodeOf(spec).normalize(text);
}

/** NFC and lowercasing as Python does them: a character Python's Unicode tables do not know is
 * kept as it is (Python treats it as a plain starter without case), the runs of characters it
 * knows between them are changed by the browser, whose tables agree with Python's on those. */
class PythonUnicode {
  constructor(assigned) {
    this.assigned = assigned && decodeRanges(assigned);
    // the first range (U+0000-U+0377 in every version): a text within it needs no look-up
    this.knownBelow = this.assigned && this.assigned[0] === 0 ? this.assigned[1] + 1 : 0;
    this.beyondKnown = new RegExp(`[^\\0-\\u{${Math.max(this.knownBelow - 1, 0).toString(16)}}]`, "u");
  }

  normalize(text) {
    const visible = this.knownRuns(text.replace(INVISIBLE, ""), (run) => run.normalize("NFC"));
    return visible.split(SPACES).filter(Boolean).join(" ");
  }

  lower(text) {
    return this.knownRuns(text, (run) => run.toLowerCase());
  }

  knownRuns(text, change) {
    if (!this.assigned || !this.beyondKnown.test(text)) return change(text);
    let changed = "";
    let runStart = 0;
    for (let i = 0; i < text.length; ) {
      const code = text.codePointAt(i);
      const size = code > 0xffff ? 2 : 1;
      if (code >= this.knownBelow && !inRanges(this.assigned, code)) {
        changed += change(text.slice(runStart, i)) + text.slice(i, i + size);
        runStart = i + size;
      }
      i += size;
    }
    return changed + change(text.slice(runStart));
  }
}

const BROWSER_UNICODE = new PythonUnicode(null);
const specUnicode = new WeakMap();

function unicodeOf(spec) {
  if (!spec) return BROWSER_UNICODE;
  if (!specUnicode.has(spec)) specUnicode.set(spec, new PythonUnicode(spec.unicode.assigned));
  return specUnicode.get(spec);
}

/** A tokenizer from a spec of attnmt/web/tokenizers.py: {tokenize, detokenize}. */
export function createTokenizer(spec) {
  if (spec?.format !== FORMAT || spec.version !== FORMAT_VERSION) {
    throw new Error(`not an ${FORMAT} version ${FORMAT_VERSION} spec: ${spec?.format} ${spec?.version}`);
  }
  if (spec.kind === "word") return new WordTokenizer(spec);
  if (spec.kind === "sentencepiece") return new SentencePieceTokenizer(spec);
  throw new Error(`unknown tokenizer kind ${spec.kind}`);
}

const firstChar = (text) => (text ? String.fromCodePoint(text.codePointAt(0)) : "");
const lastChar = (text) => (text ? Array.from(text.slice(-2)).pop() : "");

// --- the word tokenizer -------------------------------------------------------------------
//
// tokenize.py's regexes test Unicode classes (\s, \w, \d, punctuation). Here each character is
// first written as one letter naming its class in Python's tables (`classLetters`), and the same
// regexes run over those letters, their classes plain ASCII: exact whatever the browser's
// Unicode version, and fast (a regex class of hundreds of ranges is slow in V8).
//   " " space   "p" punctuation or symbol (P*, S* but "_")   "d" decimal digit (\d, in \w)
//   "w" other \w (letters, other numbers, "_")   "o" any other character (a word character
//   outside \w: combining marks, unassigned ones)   - ' ’ . , : themselves (the regexes name them)
const LITERALS = new Set("-'’.,:");
const WORD_CHAR = "[dwo]"; // [^\s<punctuation>]
const JOINER = "(?:-|['’]|\\.(?=[dw])|(?<=d)[,:](?=d))";
const WORD = `-?${WORD_CHAR}+(?:${JOINER}${WORD_CHAR}+)*-?`;
const TOKEN = new RegExp(`${WORD}|\\.{2,}|[^ ]`, "g");
const NUMBER = /^d+(?:[.,:]d+)*$/;

/** A pattern as Python's (?i) reads it: each ASCII letter matches what Python matches. */
function ignoringCase(pattern) {
  const extra = {i: "ıİ", s: "ſ", k: "K"};
  return pattern.replace(/\[([a-z]+)\]|[a-z]/g, (match, letters) => {
    const each = (letter) => letter + letter.toUpperCase() + (extra[letter] ?? "");
    return `[${Array.from(letters ?? match, each).join("")}]`;
  });
}

// The clitic patterns without their \w lookaround, which is tested apart: a word ends in at most
// one clitic and starts with at most one elided word, so the lookaround cannot pick another match.
const CLITIC = ignoringCase("n['’]t|['’](?:s|m|re|ve|ll|d)");
const ELIDED = ignoringCase("(?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu|quoiqu)['’]");
const ENGLISH_CLITIC_SUFFIX = new RegExp(`(?:${CLITIC})$`, "u");
const ENGLISH_CLITIC = new RegExp(`^(?:${CLITIC})$`, "u");
const FRENCH_ELISION_PREFIX = new RegExp(`^${ELIDED}`, "u");
const FRENCH_ELIDED = new RegExp(`^${ELIDED}$`, "u");

const STICKS_TO_PREVIOUS = new Set([...",.)]}%°…”’!?:;»", "..."]);
const STICKS_TO_NEXT = new Set("([{¿¡«");
const STICKS_TO_BOTH = new Set("/");
const QUOTES = new Set("\"'“‘„‚");
const CLOSING_QUOTES = new Set("\"'“”‘’»");
const FRENCH_SPACED = new Set("!?:;«»");
const CURRENCY_LIKE = new Set("$£€¥#");
const GERMAN_OPENERS = {"“": "„", "‘": "‚"};

/** The spec's delta-coded ranges as [first, last, first, last, ...]. */
function decodeRanges(deltas) {
  const ranges = new Int32Array(deltas.length);
  let end = 0;
  for (let i = 0; i < deltas.length; i += 2) {
    ranges[i] = end + deltas[i];
    ranges[i + 1] = end = ranges[i] + deltas[i + 1];
  }
  return ranges;
}

function inRanges(ranges, code) {
  let low = 0;
  let high = ranges.length / 2 - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (code < ranges[2 * middle]) high = middle - 1;
    else if (code > ranges[2 * middle + 1]) low = middle + 1;
    else return true;
  }
  return false;
}

/** Python's character classes, from the spec: the class letter of a character, isalnum, isdigit. */
class CharacterClasses {
  constructor(classes) {
    this.punctuation = decodeRanges(classes.punctuation);
    this.alnum = decodeRanges(classes.alnum);
    this.decimal = decodeRanges(classes.decimal);
    this.digit = decodeRanges(classes.digit);
    this.letters = new Map();
  }

  letter(char) {
    let letter = this.letters.get(char);
    if (letter === undefined) {
      const code = char.codePointAt(0);
      if (LITERALS.has(char)) letter = char;
      else if (SPACES.test(char)) letter = " ";
      else if (inRanges(this.punctuation, code)) letter = "p";
      else if (inRanges(this.decimal, code)) letter = "d";
      else letter = char === "_" || inRanges(this.alnum, code) ? "w" : "o";
      if (this.letters.size < 65536) this.letters.set(char, letter);
    }
    return letter;
  }

  /** One class letter per character (code point) of `chars`. */
  classLetters(chars) {
    return chars.map((char) => this.letter(char)).join("");
  }

  isWord(char) {
    return char !== "" && "dw".includes(this.letter(char));
  }

  isAlnum(char) {
    return char !== "" && inRanges(this.alnum, char.codePointAt(0));
  }

  isDigit(char) {
    return char !== "" && inRanges(this.digit, char.codePointAt(0));
  }

  isNumber(text) {
    return NUMBER.test(this.classLetters(Array.from(text)));
  }
}

class WordTokenizer {
  constructor(spec) {
    this.lang = spec.lang;
    this.lowercase = spec.lowercase;
    this.classes = new CharacterClasses(spec.classes);
    this.unicode = unicodeOf(spec);
  }

  tokenize(text) {
    text = this.unicode.normalize(text);
    if (this.lowercase) text = this.unicode.lower(text);
    const chars = Array.from(text);
    const words = Array.from(this.classes.classLetters(chars).matchAll(TOKEN), (match) =>
      chars.slice(match.index, match.index + match[0].length).join(""),
    );
    return words.flatMap((word) => this.splitWord(word));
  }

  /** One regex word -> its clitics and numeric pieces (tokenize.py's _split_word). */
  splitWord(word) {
    const parts = word.split("-");
    if (parts.length > 1 && parts.every((part) => this.classes.isNumber(part))) {
      return parts.flatMap((number) => ["-", number]).slice(1);
    }
    const prefix = [];
    const suffix = [];
    let clitic;
    if (this.lang === "fr") {
      while ((clitic = this.elisionStarting(word))) {
        prefix.push(clitic);
        word = word.slice(clitic.length);
      }
    } else if (this.lang === "en") {
      while ((clitic = this.cliticEnding(word))) {
        suffix.unshift(clitic);
        word = word.slice(0, word.length - clitic.length);
      }
    }
    return [...prefix, word, ...suffix];
  }

  /** The elided word that starts `word`, followed by a \w character (_FRENCH_ELISION_PREFIX), or null. */
  elisionStarting(word) {
    const match = FRENCH_ELISION_PREFIX.exec(word);
    return match && this.classes.isWord(firstChar(word.slice(match[0].length))) ? match[0] : null;
  }

  /** The clitic that ends `word`, after a \w character (_ENGLISH_CLITIC_SUFFIX), or null. */
  cliticEnding(word) {
    const match = ENGLISH_CLITIC_SUFFIX.exec(word);
    return match && this.classes.isWord(lastChar(word.slice(0, match.index))) ? match[0] : null;
  }

  detokenize(tokens) {
    tokens = Array.from(tokens);
    const glue = this.glueFlags(tokens);
    const groups = [];
    tokens.forEach((token, i) => {
      if (glue[i] && groups.length) groups[groups.length - 1].push(token);
      else groups.push([token]);
    });
    return groups.flatMap((group) => this.joinSafely(group)).join(" ");
  }

  /** The group joined where the join tokenizes back into the same tokens (tokenize.py's _join_safely). */
  joinSafely(group) {
    const same = (a, b) => a.length === b.length && a.every((token, i) => token === b[i]);
    if (group.length === 1 || same(this.tokenize(group.join("")), group)) return [group.join("")];
    const runs = [[group[0]]];
    for (const token of group.slice(1)) {
      const run = runs[runs.length - 1];
      if (same(this.tokenize(run.join("") + token), [...run, token])) run.push(token);
      else runs.push([token]);
    }
    return runs.map((run) => run.join(""));
  }

  /** For each token: whether it is written right after the previous one (tokenize.py's _glue_flags). */
  glueFlags(tokens) {
    const classes = this.classes;
    const sticksToPrevious = [];
    const sticksToNext = [];
    const openQuotes = new Set();
    tokens.forEach((token, i) => {
      const previous = i > 0 ? tokens[i - 1] : "";
      const following = tokens[i + 1];
      let left;
      let right;
      if (QUOTES.has(token)) {
        right = quoteOpens(token, previous, tokens.slice(i + 1), openQuotes, classes);
        left = !right;
      } else if (token === "-") {
        left = right = classes.isNumber(previous) && following !== undefined && classes.isNumber(following);
      } else if (CURRENCY_LIKE.has(token)) {
        right = following !== undefined && classes.isDigit(firstChar(following));
        left = !right && classes.isDigit(lastChar(previous));
      } else if (token.startsWith("-") && i > 0 && sticksToPrevious[i - 1] && CLOSING_QUOTES.has(previous)) {
        [left, right] = [true, false];
      } else {
        [left, right] = this.punctuationSides(token, previous);
      }
      sticksToPrevious.push(left);
      sticksToNext.push(right);
    });
    return tokens.map((_, i) => i > 0 && (sticksToNext[i - 1] || sticksToPrevious[i]));
  }

  punctuationSides(token, previous) {
    if (this.lang === "fr") {
      if (FRENCH_SPACED.has(token)) return ["!?".includes(token) && (previous === "!" || previous === "?"), false];
      if (FRENCH_ELIDED.test(token)) return [false, true];
    }
    if (this.lang === "en" && ENGLISH_CLITIC.test(token)) return [true, false];
    const both = STICKS_TO_BOTH.has(token);
    return [both || STICKS_TO_PREVIOUS.has(token), both || STICKS_TO_NEXT.has(token)];
  }
}

function quoteOpens(quote, previous, rest, openQuotes, classes) {
  const opener = GERMAN_OPENERS[quote] ?? quote;
  if (openQuotes.has(opener)) {
    openQuotes.delete(opener);
    return false;
  }
  if (quote === "'" && classes.isAlnum(lastChar(previous)) && !rest.includes("'")) return false;
  openQuotes.add(quote);
  return true;
}

// --- SentencePiece ------------------------------------------------------------------------

const SPACE_SYMBOL = "▁";
const UNKNOWN_PENALTY = 10; // a character no piece covers costs the lowest score minus this

class SentencePieceTokenizer {
  constructor(spec) {
    if (spec.model !== "bpe" && spec.model !== "unigram") throw new Error(`unknown model type ${spec.model}`);
    this.spec = spec;
    this.lowercase = spec.lowercase;
    this.unicode = unicodeOf(spec);
    this.scores = spec.scores.map(Math.fround);
    this.unkId = spec.unk_id;
    this.controlIds = new Set(spec.control_ids);
    // SentencePiece looks a piece up among the unknown and control pieces first, then the others.
    this.reserved = new Map();
    this.normal = new Map();
    spec.pieces.forEach((piece, id) => {
      const table = id === this.unkId || this.controlIds.has(id) ? this.reserved : this.normal;
      if (!table.has(piece)) table.set(piece, id);
    });
    let lowest = Infinity;
    this.longest = 0;
    for (const [piece, id] of this.normal) {
      lowest = Math.min(lowest, this.scores[id]);
      this.longest = Math.max(this.longest, Array.from(piece).length);
    }
    this.unknownScore = Math.fround(lowest - UNKNOWN_PENALTY);
  }

  pieceId(piece) {
    return this.reserved.get(piece) ?? this.normal.get(piece) ?? this.unkId;
  }

  tokenize(text) {
    text = this.unicode.normalize(text);
    if (this.lowercase) text = this.unicode.lower(text);
    const symbols = Array.from(this.normalize(text));
    if (!symbols.length) return [];
    const pieces = this.spec.model === "bpe" ? this.mergePairs(symbols) : this.bestSegmentation(symbols);
    // Consecutive unknown pieces are one piece, as SentencePiece writes them.
    const merged = [];
    let previousUnknown = false;
    for (const [piece, id] of pieces) {
      const unknown = id === this.unkId;
      if (unknown && previousUnknown) merged[merged.length - 1] += piece;
      else merged.push(piece);
      previousUnknown = unknown;
    }
    return merged;
  }

  /** SentencePiece's normalizer without a normalization rule: a dummy-prefix space, extra
   * spaces removed (" " only; trailing "▁" too, typed ones included), spaces -> "▁". */
  normalize(text) {
    const removeExtra = this.spec.remove_extra_whitespaces;
    if (removeExtra) text = text.replace(/^ +/, "");
    if (!text) return "";
    let normalized = this.spec.add_dummy_prefix ? SPACE_SYMBOL : "";
    let previousSpace = removeExtra;
    for (const char of text) {
      if (previousSpace && char === " ") continue;
      normalized += char === " " ? SPACE_SYMBOL : char;
      previousSpace = removeExtra && char === " ";
    }
    return removeExtra ? normalized.replace(/▁+$/u, "") : normalized;
  }

  /** BPE: merge the adjacent pair whose concatenation is the best-scoring piece (the leftmost
   * of equals) until no pair is a piece. A heap of candidate pairs, stale ones skipped. */
  mergePairs(symbols) {
    const pieces = symbols.slice();
    const next = symbols.map((_, i) => (i + 1 < symbols.length ? i + 1 : -1));
    const previous = symbols.map((_, i) => i - 1);
    const heap = new PairHeap();
    const consider = (left, right) => {
      if (left < 0 || right < 0) return;
      const id = this.normal.get(pieces[left] + pieces[right]);
      if (id === undefined) return;
      heap.push({score: this.scores[id], left, right, length: pieces[left].length + pieces[right].length});
    };
    for (let i = 1; i < pieces.length; i++) consider(i - 1, i);
    while (heap.size) {
      const {left, right, length} = heap.pop();
      if (!pieces[left] || !pieces[right] || pieces[left].length + pieces[right].length !== length) continue;
      pieces[left] += pieces[right];
      pieces[right] = "";
      next[left] = next[right];
      if (next[right] >= 0) previous[next[right]] = left;
      consider(previous[left], left);
      consider(left, next[left]);
    }
    return pieces.filter(Boolean).map((piece) => [piece, this.pieceId(piece)]);
  }

  /** Unigram: the segmentation with the best sum of scores (Viterbi over character positions).
   * As in SentencePiece, sums are float32 (rounded before they are compared), a character no
   * piece of one character covers is an unknown piece, and of equal sums ending at a position
   * the first offered (the piece starting earliest) wins. */
  bestSegmentation(symbols) {
    const n = symbols.length;
    const score = new Float64Array(n + 1);
    const start = new Int32Array(n + 1).fill(-1);
    const ids = new Int32Array(n + 1);
    const offer = (from, to, candidate, id) => {
      if (start[to] === -1 || candidate > score[to]) {
        score[to] = candidate;
        start[to] = from;
        ids[to] = id;
      }
    };
    for (let from = 0; from < n; from++) {
      let piece = "";
      let single = false;
      for (let to = from + 1; to <= Math.min(n, from + this.longest); to++) {
        piece += symbols[to - 1];
        const id = this.normal.get(piece);
        if (id === undefined) continue;
        offer(from, to, Math.fround(this.scores[id] + score[from]), id);
        single ||= to === from + 1;
      }
      if (!single) offer(from, from + 1, Math.fround(this.unknownScore + score[from]), this.unkId);
    }
    const pieces = [];
    for (let to = n; to > 0; to = start[to]) pieces.push([symbols.slice(start[to], to).join(""), ids[to]]);
    return pieces.reverse();
  }

  /** What SentencePieceProcessor.decode(pieces) returns for a list of piece strings. */
  detokenize(tokens) {
    let text = "";
    let atStart = true; // a leading "▁" is dropped until the text has begun
    let spaceDropped = false;
    for (const piece of tokens) {
      if (spaceDropped || text) atStart = false;
      let decoded;
      [decoded, spaceDropped] = this.decodePiece(piece, atStart);
      text += decoded;
    }
    return text;
  }

  /** [the text of one piece, whether it dropped the leading "▁" of the text]. */
  decodePiece(piece, atStart) {
    const id = this.pieceId(piece);
    if (this.controlIds.has(id)) return ["", false];
    if (id === this.unkId) {
      // the unknown piece writes its surface; a piece the model lacks is written as it is
      return [piece === this.spec.pieces[this.unkId] ? this.spec.unk_surface : piece, false];
    }
    const {add_dummy_prefix: dummyPrefix, remove_extra_whitespaces: removeExtra} = this.spec;
    let dropped = false;
    if (atStart && (dummyPrefix || removeExtra) && piece.startsWith(SPACE_SYMBOL)) {
      piece = piece.slice(SPACE_SYMBOL.length);
      dropped = !removeExtra; // removing extra spaces drops the "▁" of every piece until the text begins
    }
    return [piece.replaceAll(SPACE_SYMBOL, " "), dropped];
  }
}

/** A max-heap of BPE pair candidates: the highest score first, of equal scores the leftmost. */
class PairHeap {
  constructor() {
    this.items = [];
  }

  get size() {
    return this.items.length;
  }

  before(a, b) {
    return a.score > b.score || (a.score === b.score && a.left < b.left);
  }

  push(item) {
    const items = this.items;
    items.push(item);
    for (let i = items.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!this.before(items[i], items[parent])) break;
      [items[i], items[parent]] = [items[parent], items[i]];
      i = parent;
    }
  }

  pop() {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length) {
      items[0] = last;
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        const right = left + 1;
        let best = i;
        if (left < items.length && this.before(items[left], items[best])) best = left;
        if (right < items.length && this.before(items[right], items[best])) best = right;
        if (best === i) break;
        [items[i], items[best]] = [items[best], items[i]];
        i = best;
      }
    }
    return top;
  }
}
