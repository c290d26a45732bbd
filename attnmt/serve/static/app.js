// The attention explorer: plain JavaScript over attnmt's JSON API (/docs describes it).
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
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

// The start of the translation typed so far, and the required terms (separated by ";")
function steering() {
  const terms = $("require").value.split(";").map((term) => term.trim()).filter(Boolean);
  return {prefix: $("prefix").value, terms};
}

function translateRequest(model, sentence) {
  const request = {model, sentences: [sentence], beam_size: Number($("beam").value),
                   n_best: Math.min(5, Number($("beam").value)), return_attention: true};
  const {prefix, terms} = steering();
  if (prefix.trim()) request.prefixes = [prefix];
  if (terms.length) request.constraints = [terms];
  return request;
}

// --- the heatmap: output tokens down, source tokens across -----------------------------

function element(name, attributes = {}, text = "") {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text) node.textContent = text;
  return node;
}

// matplotlib's "Blues": near white at 0, mid blue at 0.5, deep blue at 1
const BLUES = [[247, 251, 255], [107, 174, 214], [8, 48, 107]];

function color(weight) {
  const [from, to, t] = weight < 0.5 ? [BLUES[0], BLUES[1], weight * 2] : [BLUES[1], BLUES[2], weight * 2 - 1];
  return `rgb(${from.map((c, i) => Math.round(c + (to[i] - c) * t)).join(", ")})`;
}

// attention: rows (one per output token, </s> included) x columns (source tokens)
function drawHeatmap(container, sourceTokens, outputTokens, attention) {
  container.replaceChildren();
  const cell = 30;
  const left = 12 + 8 * Math.max(...outputTokens.map((t) => t.length), 3);
  const top = 12 + 6 * Math.max(...sourceTokens.map((t) => t.length), 3);
  const svg = element("svg", {width: left + cell * sourceTokens.length + 10, height: top + cell * outputTokens.length + 10});
  sourceTokens.forEach((token, col) => {
    const x = left + col * cell + cell / 2, y = top - 6;
    svg.append(element("text", {class: "token src-token", "data-col": col, x, y,
                                transform: `rotate(-50 ${x} ${y})`}, token));
  });
  outputTokens.forEach((token, row) => {
    svg.append(element("text", {class: "token out-token", "data-row": row, x: left - 6, y: top + row * cell + cell * 0.65,
                                "text-anchor": "end"}, token));
    const weights = attention[row] || [];
    const strongest = weights.indexOf(Math.max(...weights));
    weights.forEach((weight, col) => {
      const rect = element("rect", {class: "cell" + (col === strongest ? " argmax" : ""), "data-row": row, "data-col": col,
                                    x: left + col * cell, y: top + row * cell, width: cell, height: cell,
                                    fill: color(weight)});
      rect.append(element("title", {}, `${token} → ${sourceTokens[col]}: ${weight.toFixed(3)}`));
      svg.append(rect);
    });
  });
  container.append(svg);
  linkHover(svg, attention);
}

// Hovering an output token (or a cell) lights the source tokens it attends to; hovering a
// source token lights the outputs that attend to it. Strength shows as opacity.
function linkHover(svg, attention) {
  const clear = () => {
    svg.querySelectorAll(".highlight, .focus").forEach((node) => node.classList.remove("highlight", "focus"));
    svg.querySelectorAll(".cell").forEach((node) => node.classList.remove("dim"));
    svg.querySelectorAll("text.token").forEach((node) => node.style.removeProperty("opacity"));
  };
  // Light `focus`, fade the labels of the other axis by `weightOf(label)`, dim the cells not `kept`.
  const show = (focus, otherLabels, weightOf, kept) => {
    clear();
    focus.classList.add("focus");
    const labels = [...svg.querySelectorAll(otherLabels)];
    const top = Math.max(...labels.map(weightOf)) || 1;
    labels.forEach((node) => {
      node.style.opacity = 0.25 + 0.75 * weightOf(node) / top;
      if (weightOf(node) >= 0.5 * top) node.classList.add("highlight");
    });
    svg.querySelectorAll(".cell").forEach((node) => node.classList.toggle("dim", !kept(node)));
  };
  const showRow = (row) => show(svg.querySelector(`.out-token[data-row="${row}"]`), ".src-token",
                                (node) => attention[row][Number(node.dataset.col)],
                                (cell) => Number(cell.dataset.row) === row);
  const showColumn = (col) => show(svg.querySelector(`.src-token[data-col="${col}"]`), ".out-token",
                                   (node) => attention[Number(node.dataset.row)][col],
                                   (cell) => Number(cell.dataset.col) === col);
  svg.querySelectorAll(".out-token").forEach((node) => node.addEventListener("mouseenter", () => showRow(Number(node.dataset.row))));
  svg.querySelectorAll(".cell").forEach((node) => node.addEventListener("mouseenter", () => showRow(Number(node.dataset.row))));
  svg.querySelectorAll(".src-token").forEach((node) => node.addEventListener("mouseenter", () => showColumn(Number(node.dataset.col))));
  svg.addEventListener("mouseleave", clear);
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
    const data = await api("/v1/translate", translateRequest($("model").value, sentence), controller.signal);
    if (translating !== controller) return false;
    const result = data.translations[0];
    if (result.unmet_constraints && result.unmet_constraints.length) {
      status(`Its length limit left no room for: ${result.unmet_constraints.join("; ")}`, true);
    }
    const best = result.hypotheses[0];
    $("translation").textContent = best.text;
    $("nbest").replaceChildren(...result.hypotheses.map((h, rank) => {
      const row = document.createElement("tr");
      row.innerHTML = `<td>${rank + 1}</td><td></td><td class="score">${h.score.toFixed(3)}</td>`;
      row.children[1].textContent = h.text;
      return row;
    }));
    if (result.source_tokens.length) {
      drawHeatmap($("heatmap"), result.source_tokens, [...best.tokens, "</s>"], best.attention);
    } else {
      $("heatmap").replaceChildren();
    }
    return !(result.unmet_constraints && result.unmet_constraints.length);  // keep the warning shown
  });
}

// Typing the start of the translation (or the terms) translates again once the typing pauses
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

let explanation = null;
let chosen = 0;

// A candidate's tokens carry its history; its attention rows are found by walking back
// through the parents (slot numbers of the previous step's kept candidates).
function attentionSoFar(step, index) {
  const rows = [];
  let candidate = explanation.steps[step][index];
  for (let t = step; t >= 0; t--) {
    rows.unshift(candidate.attention);
    if (t > 0) candidate = explanation.steps[t - 1].find((c) => c.slot === candidate.parent);
  }
  return rows;
}

function showStep() {
  const step = Number($("step").value);
  const candidates = explanation.steps[step];
  $("step-label").textContent = `step ${step + 1} of ${explanation.steps.length}`;
  chosen = Math.min(chosen, candidates.length - 1);
  const widest = Math.max(...candidates.flatMap((c) => c.attention)) || 1;
  $("candidates").replaceChildren(...candidates.map((candidate, index) => {
    const row = document.createElement("tr");
    row.className = index === chosen ? "selected" : "";
    row.innerHTML = `<td class="num">${index + 1}</td><td></td><td class="num">${candidate.log_prob.toFixed(3)}</td>` +
      `<td><span class="badge ${candidate.status}">${candidate.status}</span></td><td><span class="bars"></span></td>`;
    row.children[1].textContent = candidate.tokens.join(" ");
    row.querySelector(".bars").append(...candidate.attention.map((weight, col) => {
      const bar = document.createElement("span");
      bar.style.opacity = 0.1 + 0.9 * weight / widest;
      bar.title = `${explanation.source_tokens[col]}: ${weight.toFixed(3)}`;
      return bar;
    }));
    row.addEventListener("click", () => { chosen = index; showStep(); });
    return row;
  }));
  const candidate = candidates[chosen];
  drawHeatmap($("search-heatmap"), explanation.source_tokens, candidate.tokens, attentionSoFar(step, chosen));
}

async function explain() {
  const sentence = $("source").value.trim();
  if (!sentence) return status("Type a sentence first.", true);
  await attempt("replaying the search", async () => {
    explanation = await api("/v1/explain", {model: $("model").value, sentence, beam_size: Number($("beam").value)});
    $("step").max = explanation.steps.length - 1;
    $("step").value = 0;
    chosen = 0;
    showStep();
  });
}

function moveStep(by) {
  if (!explanation) return;
  const slider = $("step");
  slider.value = Math.max(0, Math.min(Number(slider.max), Number(slider.value) + by));
  showStep();
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

function describeShort(name) {
  const model = models.find((m) => m.name === name);
  return `${name}: ${model.architecture.attention} attention, ${model.architecture.decoder} decoder`;
}

function describe(model) {
  const a = model.architecture, t = model.training;
  const score = t.valid_score == null ? "" : `, validation ${t.valid_metric} ${t.valid_score.toFixed(2)}`;
  return `${model.source_language} → ${model.target_language}; ${a.rnn.toUpperCase()}, ${a.attention} attention, ` +
    `${a.decoder} decoder, encoder ${a.encoder_hidden}${a.bidirectional ? " × 2 directions" : ""}, decoder ` +
    `${a.decoder_hidden}, ${a.parameters.toLocaleString()} parameters; checkpoint ${t.checkpoint} ` +
    `(step ${t.step}${score})`;
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
  $("prefix").addEventListener("input", translateSoon);
  $("require").addEventListener("input", translateSoon);
  $("score-button").addEventListener("click", scoreOwn);
  $("compare-button").addEventListener("click", compare);
  $("explain-button").addEventListener("click", explain);
  $("step").addEventListener("input", () => explanation && showStep());
  $("step-back").addEventListener("click", () => moveStep(-1));
  $("step-forward").addEventListener("click", () => moveStep(1));
  $("analysis-button").addEventListener("click", loadAnalysis);
  for (const id of ["min-length", "max-length", "order"]) $(id).addEventListener("input", showAnalysis);
  document.querySelectorAll(".tab").forEach((tab) => tab.addEventListener("click", () => {
    document.querySelectorAll(".tab, .panel").forEach((node) => node.classList.remove("active"));
    tab.classList.add("active");
    $(tab.dataset.tab).classList.add("active");
  }));
}

start().catch((error) => status("Cannot reach the server: " + error.message, true));
