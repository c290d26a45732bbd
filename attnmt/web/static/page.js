// The exported page: a run's model translating in the browser, its attention drawn, its beam
// search replayed. Everything runs here: the tokenizers (tokenizers.js), the search (search.js)
// over the ONNX graphs in model/ run by onnxruntime-web (ort/, the global `ort`), the drawing
// shared with `attnmt serve`'s explorer (views.js). model.json describes the run.
"use strict";

import {BOS, EOS, OnnxModel, PAD, UNK, beamSearch, greedy} from "./search.js";
import {createTokenizer} from "./tokenizers.js";
import {SearchReplay, showResult} from "./views.js";

const $ = (id) => document.getElementById(id);

function status(message, isError = false) {
  $("status").textContent = message;
  $("status").classList.toggle("error", isError);
}

async function fetchJson(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// Text <-> ids, and the search, as `attnmt.translate.Translator` does them for one sentence.
class WebTranslator {
  constructor(description, model, vocabularies) {
    this.description = description;
    this.model = model;
    this.source = createTokenizer(description.tokenizers.source);
    this.target = createTokenizer(description.tokenizers.target);
    this.targetTokens = vocabularies.target;
    this.sourceIds = new Map(vocabularies.source.map((token, id) => [token, id]));
  }

  // sentence -> {tokens, ids, notes}: its source tokens (at most max_source_tokens) and their ids
  read(sentence) {
    const notes = [];
    let tokens = this.source.tokenize(sentence);
    const most = this.description.max_source_tokens;
    if (tokens.length > most) {
      notes.push(`The sentence has ${tokens.length} tokens; only its first ${most} are translated.`);
      tokens = tokens.slice(0, most);
    }
    const ids = tokens.map((token) => this.sourceIds.get(token) ?? UNK);
    const unknown = tokens.filter((token, i) => ids[i] === UNK);
    if (unknown.length) notes.push(`Unknown to the model (read as <unk>): ${[...new Set(unknown)].join(" ")}`);
    return {tokens, ids, notes};
  }

  options(beam) {
    return {...this.description.decode, beam_size: beam, n_best: Math.min(5, beam)};
  }

  // Target ids -> tokens, as `Vocab.decode` gives them (PAD and BOS dropped, stop at EOS)
  tokens(ids) {
    const tokens = [];
    for (const id of ids) {
      if (id === EOS) break;
      if (id !== PAD && id !== BOS) tokens.push(this.targetTokens[id]);
    }
    return tokens;
  }

  hypothesis(found) {
    const tokens = this.tokens(found.tokens);
    return {text: this.target.detokenize(tokens), tokens, ids: found.tokens, attention: found.attention,
            score: found.score, log_prob: found.log_prob};
  }

  // sentence, beam size -> {source_tokens, hypotheses (best first), notes}; greedy for a beam of one
  async translate(sentence, beam = this.description.decode.beam_size) {
    const source = this.read(sentence);
    if (!source.tokens.length) return {source_tokens: [], hypotheses: [{text: "", tokens: [], ids: [], attention: [],
                                                                         score: 0, log_prob: 0}], notes: source.notes};
    const options = this.options(beam);
    const found = beam === 1 ? await greedy(this.model, source.ids, options)
                             : await beamSearch(this.model, source.ids, options);
    return {source_tokens: source.tokens, hypotheses: found.map((h) => this.hypothesis(h)), notes: source.notes};
  }

  // The search of one sentence step by step, as `Translator.explain` records it
  async explain(sentence, beam) {
    const source = this.read(sentence);
    if (!source.tokens.length) throw new Error("Nothing to explain: the sentence has no tokens.");
    const steps = [];
    let beams = [[]];  // the live hypotheses' tokens by slot
    const record = ({candidates, picks, finishing, penalty}) => {
      const slots = new Map(picks.filter((i) => candidates[i].logProb > -Infinity).map((i, rank) => [i, rank]));
      const shown = candidates.filter((c) => c.logProb > -Infinity).map((c) => {
        const finished = finishing.includes(c);
        const slot = slots.get(candidates.indexOf(c)) ?? -1;
        return {tokens: [...beams[c.origin], this.targetTokens[c.token]], parent: c.origin, log_prob: c.logProb,
                status: finished ? "finished" : slot >= 0 ? "kept" : "dropped", slot,
                score: finished ? c.logProb / penalty : null, attention: c.stepAttention};
      });
      beams = shown.filter((c) => c.slot >= 0).sort((a, b) => a.slot - b.slot).map((c) => c.tokens);
      steps.push(shown);
    };
    const found = await beamSearch(this.model, source.ids, this.options(Math.max(beam, 1)), record);
    return {source_tokens: source.tokens, steps, translation: this.hypothesis(found[0])};
  }
}

function describe(description) {
  const a = description.model.architecture;
  const int8 = description.model.quantization === "int8" ? "int8" : "float32";
  return `${description.languages.source} → ${description.languages.target}; ${a.rnn.toUpperCase()}, ` +
    `${a.attention} attention, ${a.decoder} decoder, ${int8} weights; running in this page ` +
    `(onnxruntime-web ${description.runtime.version}, WebAssembly, one thread).`;
}

async function load() {
  if (typeof WebAssembly !== "object" || typeof ort === "undefined") {
    throw new Error("This browser cannot run the model: it needs WebAssembly and the files in ort/.");
  }
  const description = await fetchJson("model.json");
  ort.env.wasm.numThreads = 1;  // no cross-origin isolation on plain static hosts: one thread
  ort.env.wasm.wasmPaths = new URL("ort/", document.baseURI).href;
  const folder = description.model.folder;
  const [source, target] = await Promise.all(["src", "tgt"].map((side) => fetchJson(`${folder}/${side}.vocab.json`)));
  const model = await OnnxModel.load(ort, folder, description.model.state, {executionProviders: ["wasm"]});
  return new WebTranslator(description, model, {source: source.tokens, target: target.tokens});
}

let busy = Promise.resolve();  // one search at a time: each waits for the one before

function serially(work) {
  const next = busy.then(work, work);
  busy = next.catch(() => {});
  return next;
}

async function attempt(what, work) {
  status(what + "…");
  try {
    await serially(work);
  } catch (error) {
    status(error.message, true);
  }
}

function show(result) {
  showResult({translation: $("translation"), nbest: $("nbest"), heatmap: $("heatmap")}, result);
  status(result.notes.join(" "), result.notes.length > 0);
}

function start(translator, replay) {
  const beam = () => Number($("beam").value);
  const sentence = () => $("source").value.trim();
  const translate = () => {
    if (!sentence()) return status("Type a sentence first.", true);
    return attempt("translating", async () => show(await translator.translate(sentence(), beam())));
  };
  $("translate-button").addEventListener("click", translate);
  $("source").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); translate(); }
  });
  $("explain-button").addEventListener("click", () => {
    if (!sentence()) return status("Type a sentence first.", true);
    return attempt("replaying the search", async () => {
      replay.show(await translator.explain(sentence(), beam()));
      status("");
    });
  });
  $("step").addEventListener("input", () => replay.draw());
  $("step-back").addEventListener("click", () => replay.move(-1));
  $("step-forward").addEventListener("click", () => replay.move(1));
  const examples = translator.description.examples || [];
  examples.forEach((example) => $("examples").append(new Option(example, example)));
  if (!examples.length) $("examples").hidden = true;
  $("examples").addEventListener("change", () => { if ($("examples").value) $("source").value = $("examples").value; });
  const decodeBeam = translator.description.decode.beam_size;
  $("beam").value = [1, 2, 3, 5, 8].includes(decodeBeam) ? decodeBeam : 5;
  for (const id of ["translate-button", "explain-button"]) $(id).disabled = false;
}

document.querySelectorAll(".tab").forEach((tab) => tab.addEventListener("click", () => {
  document.querySelectorAll(".tab, .panel").forEach((node) => node.classList.remove("active"));
  tab.classList.add("active");
  $(tab.dataset.tab).classList.add("active");
}));

// What scripts (tests, benchmarks) use: `await attnmt.ready`, then `attnmt.translate(sentence, beam)`.
const ready = load().then((translator) => {
  const replay = new SearchReplay({slider: $("step"), label: $("step-label"), table: $("candidates"),
                                   heatmap: $("search-heatmap")});
  $("model-info").textContent = describe(translator.description);
  start(translator, replay);
  window.attnmt.loadedAt = performance.now();
  return translator;
});
window.attnmt = {
  ready: ready.then(() => true),
  translate: async (sentence, beam) => serially(async () => (await ready).translate(sentence, beam)),
};
ready.catch((error) => {
  $("model-info").textContent = "";
  status(`The model could not be loaded: ${error.message}`, true);
});
