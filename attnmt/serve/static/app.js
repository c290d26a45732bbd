// The attention explorer: plain JavaScript over attnmt's JSON API (/docs describes it).
"use strict";

import {SearchReplay, drawHeatmap, showResult} from "/shared/views.js";

const $ = (id) => document.getElementById(id);
let models = [];

// --- talking to the API ----------------------------------------------------------------

async function api(path, body, signal = undefined) {
  const response = await fetch(path, body === undefined ? {signal} : {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify(body),
    signal,
  });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function status(message, isError = false) {
  $("status").textContent = message;
  $("status").classList.toggle("error", isError);
}

async function attempt(what, work) {
  status(what + "…");
  try {
    if ((await work()) !== false) status("");
  } catch (error) {
    if (error.name !== "AbortError") status(error.message, true);  // aborted: a newer request took over
  }
}

// The start of the translation typed so far, and the required phrases (separated by ";")
function steering() {
  const requiredPhrases = $("require").value.split(";").map((phrase) => phrase.trim()).filter(Boolean);
  return {prefix: $("prefix").value, requiredPhrases};
}

function translateRequest(model, sentence) {
  const request = {model, sentences: [sentence], beam_size: Number($("beam").value),
                   n_best: Math.min(5, Number($("beam").value)), return_attention: true};
  const {prefix, requiredPhrases} = steering();
  if (prefix.trim()) request.prefixes = [prefix];
  if (requiredPhrases.length) request.required_phrases = [requiredPhrases];
  return request;
}

function showTranslation(container, sentence, title = "") {
  container.replaceChildren();
  const best = sentence.hypotheses[0];
  if (title) container.append(Object.assign(document.createElement("h3"), {textContent: title}));
  container.append(Object.assign(document.createElement("p"), {className: "translation", textContent: best.text}));
  const map = document.createElement("div");
  map.className = "heatmap";
  container.append(map);
  if (sentence.source_tokens.length) drawHeatmap(map, sentence.source_tokens, [...best.tokens, "</s>"], best.attention);
}

// --- translation ---------------------------------------------------------------------------

let translating = null;  // the request in flight: the next one cancels it

async function translate() {
  const sentence = $("source").value.trim();
  if (!sentence) return status("Type a sentence first.", true);
  if (translating) translating.abort();
  const controller = new AbortController();
  translating = controller;
  await attempt("translating", async () => {
    const model = $("model").value;
    const data = await api("/v1/translate", translateRequest(model, sentence), controller.signal);
    if (translating !== controller) return false;
    const result = data.translations[0];
    const missing = result.missing_required_phrases || [];
    if (missing.length) status(`Its length limit left no room for: ${missing.join("; ")}`, true);
    showResult({translation: $("translation"), nbest: $("nbest"), heatmap: $("heatmap")}, result);
    showGlossary(result.glossary);
    hideHeads();  // the picker's layers and heads are the previous translation's until this one's arrive
    if (hasHeads(model) && result.source_tokens.length) {
      const answer = await api("/v1/heads", headsRequest(model, sentence), controller.signal);
      if (translating !== controller) return false;
      showHeads(answer);
    }
    return !missing.length;  // keep the warning shown
  });
}

// --- a transformer's layers and heads -------------------------------------------------------------

// The /v1/heads answer of the translation shown, fetched once per translation; null when there is
// none (an RNN model, whose one attention map a step is all there is, or no translation yet)
let heads = null;

function hasHeads(name) {
  return models.find((m) => m.name === name).heads;  // a transformer, not an ensemble of them
}

// The same translation as /v1/translate's: the same search and steering, so the same tokens
function headsRequest(model, sentence) {
  const request = {model, sentence, beam_size: Number($("beam").value)};
  const {prefix, requiredPhrases} = steering();
  if (prefix.trim()) request.prefix = prefix;
  if (requiredPhrases.length) request.required_phrases = requiredPhrases;
  return request;
}

// Each attention the picker offers: its rows' and columns' tokens and its maps, [layer][head][row][column]
const ATTENTIONS = {
  cross: (answer) => ({rows: answer.outputs, columns: answer.source_tokens, maps: answer.cross}),
  encoder: (answer) => ({rows: answer.source_tokens, columns: answer.source_tokens, maps: answer.encoder}),
  decoder: (answer) => ({rows: answer.outputs, columns: answer.inputs, maps: answer.decoder}),
};

function hideHeads() {
  heads = null;
  $("heads").hidden = true;
}

// A new translation's heads: the choices kept where they still exist (the alignment layer and the
// heads' average by default), the heatmap drawn as they say
function showHeads(answer) {
  heads = answer;
  const chosen = $("heads-head").value, count = answer.cross[0].length;
  const numbers = Array.from({length: count}, (_, i) => String(i));
  $("heads-head").replaceChildren(new Option("average", "mean"), ...numbers.map((i) => new Option(i, i)));
  $("heads-head").value = numbers.includes(chosen) ? chosen : "mean";
  fillLayers();
  $("heads").hidden = false;
  drawHeads();
}

// The layers of the attention chosen, the alignment layer (a decoder layer) marked: the layer
// chosen is kept where it exists, else the alignment layer (the encoder's: its last)
function fillLayers() {
  const kind = $("heads-kind").value, count = ATTENTIONS[kind](heads).maps.length;
  const marked = kind === "encoder" ? -1 : heads.alignment_layer;
  const chosen = $("heads-layer").value;
  const numbers = Array.from({length: count}, (_, i) => String(i));
  $("heads-layer").replaceChildren(...numbers.map((i) => new Option(Number(i) === marked ? `${i} (alignment)` : i, i)));
  $("heads-layer").value = numbers.includes(chosen) ? chosen : String(marked >= 0 ? marked : count - 1);
}

function drawHeads() {
  if (!heads) return;
  const {rows, columns, maps} = ATTENTIONS[$("heads-kind").value](heads);
  const layer = maps[Number($("heads-layer").value)], head = $("heads-head").value;
  const weights = head === "mean"
    ? layer[0].map((row, r) => row.map((_, c) => layer.reduce((sum, map) => sum + map[r][c], 0) / layer.length))
    : layer[Number(head)];
  drawHeatmap($("heatmap"), columns, rows, weights);
}

// A model chosen anew starts from the picker's defaults
function resetHeads() {
  hideHeads();
  $("heads-kind").value = "cross";
  $("heads-layer").replaceChildren();
  $("heads-head").replaceChildren();
}

// The terms of the server's glossary (attnmt serve --glossary) found in the sentence: those the
// translation contains, and those its length limit left no room for
function showGlossary(outcome) {
  const terms = (pairs) => pairs.map(([source, target]) => `${source} → ${target}`).join("; ");
  const parts = [];
  if (outcome && outcome.applied.length) parts.push(`Glossary terms applied: ${terms(outcome.applied)}`);
  if (outcome && outcome.missing.length) parts.push(`no room for: ${terms(outcome.missing)}`);
  $("glossary").textContent = parts.join(". ");
}

// Typing the start of the translation (or the required phrases) translates again once the typing pauses
let typingPause = null;
function translateSoon() {
  clearTimeout(typingPause);
  typingPause = setTimeout(() => { if ($("source").value.trim()) translate(); }, 300);
}

// --- scoring the user's own translation ------------------------------------------------------

async function scoreOwn() {
  const sentence = $("source").value.trim(), own = $("own").value.trim();
  if (!sentence || !own) return status("Type a source sentence and your translation of it first.", true);
  await attempt("scoring your translation", async () => {
    const data = await api("/v1/score", {model: $("model").value, sentences: [sentence], targets: [own],
                                         return_attention: true});
    const scored = data.scored[0];
    const tokens = [...scored.tokens, "</s>"];
    $("score-summary").textContent = `log-probability ${scored.log_prob.toFixed(3)}, score ${scored.score.toFixed(3)}`;
    const header = document.createElement("tr");
    header.innerHTML = "<th>#</th><th>your token</th><th>its probability</th><th>the model's choice</th><th>its probability</th>";
    $("scored").replaceChildren(header, ...tokens.map((token, i) => {
      const row = document.createElement("tr");
      row.className = scored.choices[i] === token ? "" : "differs";
      row.innerHTML = `<td class="num">${i + 1}</td><td class="token"></td>` +
        `<td class="num">${Math.exp(scored.token_log_probs[i]).toFixed(3)}</td><td class="choice"></td>` +
        `<td class="num">${Math.exp(scored.choice_log_probs[i]).toFixed(3)}</td>`;
      row.querySelector(".token").textContent = token;
      row.querySelector(".choice").textContent = scored.choices[i];
      return row;
    }));
    drawHeatmap($("score-heatmap"), scored.source_tokens, tokens, scored.attention);
  });
}

async function compare() {
  const sentence = $("source").value.trim();
  if (!sentence) return status("Type a sentence first.", true);
  await attempt("translating with both models", async () => {
    const [a, b] = [$("model").value, $("model-b").value];
    const [left, right] = await Promise.all([api("/v1/translate", translateRequest(a, sentence)),
                                            api("/v1/translate", translateRequest(b, sentence))]);
    showTranslation($("side-a"), left.translations[0], describeShort(a));
    showTranslation($("side-b"), right.translations[0], describeShort(b));
  });
}

// --- the search, step by step ----------------------------------------------------------------

let replay = null;  // made at start, once the page's elements exist

async function explain() {
  const sentence = $("source").value.trim();
  if (!sentence) return status("Type a sentence first.", true);
  await attempt("replaying the search", async () => {
    const {prefix, requiredPhrases} = steering();  // the replay shows the search as the translation was steered
    replay.show(await api("/v1/explain", {model: $("model").value, sentence, beam_size: Number($("beam").value),
                                          prefix: prefix.trim() ? prefix : "",
                                          required_phrases: requiredPhrases}));
  });
}

// --- the test set, worst translations first ----------------------------------------------------

let analysis = null;

function showAnalysis() {
  if (!analysis) return;
  const low = Number($("min-length").value), high = Number($("max-length").value);
  let rows = analysis.sentences.filter((s) => s.length >= low && s.length <= high);
  if ($("order").value === "best") rows = rows.slice().reverse();
  const score = (value) => (value == null ? "n/a" : value.toFixed(2));
  $("analysis-summary").textContent = `${analysis.model}, test split, beam ${analysis.beam_size}: ` +
    `BLEU ${score(analysis.bleu)}, chrF ${score(analysis.chrf)} on ${analysis.sentences.length} sentences; ` +
    `${rows.length} shown (source length ${low}-${high} words).`;
  const header = document.createElement("tr");
  header.innerHTML = "<th>chrF</th><th>words</th><th>source</th><th>reference</th><th>output</th>";
  $("analysis-table").replaceChildren(header, ...rows.slice(0, 300).map((sentence) => {
    const row = document.createElement("tr");
    row.innerHTML = `<td class="chrf">${sentence.chrf.toFixed(1)}</td><td>${sentence.length}</td><td></td><td></td><td></td>`;
    row.children[2].textContent = sentence.source;
    row.children[3].textContent = sentence.references[0];
    row.children[4].textContent = sentence.output;
    row.addEventListener("click", () => analyseOne(sentence));
    return row;
  }));
}

async function analyseOne(sentence) {
  await attempt("looking at its attention", async () => {
    const data = await api("/v1/translate", {model: analysis.model, sentences: [sentence.source], return_attention: true});
    const detail = $("analysis-detail");
    showTranslation(detail, data.translations[0], sentence.source);
    const references = document.createElement("p");
    references.className = "info";
    references.textContent = "reference: " + sentence.references.join("  |  ");
    detail.insertBefore(references, detail.children[1]);
  });
}

async function loadAnalysis() {
  await attempt("translating the test set (once per model; this takes a while)", async () => {
    analysis = await api(`/v1/models/${encodeURIComponent($("model").value)}/analysis`);
    showAnalysis();
  });
}

// --- models and examples -------------------------------------------------------------------

// A transformer in a few words: its layers (encoder + decoder), heads and width
function transformerShape(a) {
  return `transformer, ${a.encoder_layers}+${a.decoder_layers} layers × ${a.heads} heads, d_model ${a.d_model}`;
}

function describeShort(name) {
  const a = models.find((m) => m.name === name).architecture;
  return `${name}: ` + (a.family === "transformer" ? transformerShape(a) : `${a.attention} attention, ${a.decoder} decoder`);
}

function describe(model) {
  const a = model.architecture, t = model.training;
  const score = t.valid_score == null ? "" : `, validation ${t.valid_metric} ${t.valid_score.toFixed(2)}`;
  const shape = a.family === "transformer"
    ? `${transformerShape(a)}, feed-forward ${a.feed_forward}, ${a.norm}-norm`
    : `${a.rnn.toUpperCase()}, ${a.attention} attention, ${a.decoder} decoder, encoder ${a.encoder_hidden}` +
      `${a.bidirectional ? " × 2 directions" : ""}, decoder ${a.decoder_hidden}`;
  return `${model.source_language} → ${model.target_language}; ${shape}, ${a.parameters.toLocaleString()} ` +
    `parameters; checkpoint ${t.checkpoint} (step ${t.step}${score})` +
    (t.started_from ? `; continued from ${startedFrom(t.started_from)}` : "");
}

// Where a continued run began (`attnmt train --from`): the run and its checkpoint.
function startedFrom(start) {
  const run = start.run.split("/").filter(Boolean).pop();
  return `${run}/${start.checkpoint}` + (start.step == null ? "" : ` (step ${start.step})`);
}

async function loadExamples() {
  const select = $("examples");
  select.replaceChildren(new Option("examples from the test set…", ""));
  try {
    const data = await api(`/v1/models/${encodeURIComponent($("model").value)}/examples`);
    data.sentences.forEach((sentence) => select.append(new Option(sentence, sentence)));
  } catch (error) {
    const none = new Option("(no examples: the run's test set is not available)", "");
    none.title = error.message;
    select.replaceChildren(none);
  }
}

function chooseModel() {
  const model = models.find((m) => m.name === $("model").value);
  $("model-info").textContent = describe(model);
  $("beam").value = [1, 2, 3, 5, 8].includes(model.decoding.beam_size) ? model.decoding.beam_size : 5;
  analysis = null;
  resetHeads();
  $("analysis-table").replaceChildren();
  $("analysis-summary").textContent = "";
  loadExamples();
}

async function start() {
  models = (await api("/v1/models")).models;
  for (const select of [$("model"), $("model-b")]) {
    models.forEach((model) => select.append(new Option(model.name, model.name)));
  }
  if (models.length > 1) $("model-b").value = models[1].name;
  chooseModel();
  $("model").addEventListener("change", chooseModel);
  $("examples").addEventListener("change", () => { if ($("examples").value) $("source").value = $("examples").value; });
  $("translate-button").addEventListener("click", translate);
  $("source").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); translate(); }
  });
  $("heads-kind").addEventListener("change", () => { fillLayers(); drawHeads(); });
  for (const id of ["heads-layer", "heads-head"]) $(id).addEventListener("change", drawHeads);
  $("prefix").addEventListener("input", translateSoon);
  $("require").addEventListener("input", translateSoon);
  $("score-button").addEventListener("click", scoreOwn);
  $("compare-button").addEventListener("click", compare);
  $("explain-button").addEventListener("click", explain);
  replay = new SearchReplay({slider: $("step"), label: $("step-label"), table: $("candidates"),
                             heatmap: $("search-heatmap")});
  $("step").addEventListener("input", () => replay.draw());
  $("step-back").addEventListener("click", () => replay.move(-1));
  $("step-forward").addEventListener("click", () => replay.move(1));
  $("analysis-button").addEventListener("click", loadAnalysis);
  for (const id of ["min-length", "max-length", "order"]) $(id).addEventListener("input", showAnalysis);
  document.querySelectorAll(".tab").forEach((tab) => tab.addEventListener("click", () => {
    document.querySelectorAll(".tab, .panel").forEach((node) => node.classList.remove("active"));
    tab.classList.add("active");
    $(tab.dataset.tab).classList.add("active");
  }));
}

start().catch((error) => status("Cannot reach the server: " + error.message, true));
