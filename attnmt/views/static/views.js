// What the attention explorer (`attnmt serve`) and the exported web page (`attnmt export
// --format web`) both draw: the attention heatmap, the n-best table and the beam search replayed
// step by step. Plain DOM and SVG, no dependencies; an ES module.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

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
export function drawHeatmap(container, sourceTokens, outputTokens, attention) {
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

// hypotheses: [{text, score}] best first -> one row each in `table`
export function showNbest(table, hypotheses) {
  table.replaceChildren(...hypotheses.map((h, rank) => {
    const row = document.createElement("tr");
    row.innerHTML = `<td>${rank + 1}</td><td></td><td class="score">${h.score.toFixed(3)}</td>`;
    row.children[1].textContent = h.text;
    return row;
  }));
}

// A translation result (`/v1/translate`'s shape: source_tokens, hypotheses best first) drawn into
// `parts`: its best text, its n-best table, and the best one's attention as a heatmap.
export function showResult(parts, result) {
  const best = result.hypotheses[0];
  parts.translation.textContent = best.text;
  showNbest(parts.nbest, result.hypotheses);
  if (result.source_tokens.length) {
    drawHeatmap(parts.heatmap, result.source_tokens, [...best.tokens, "</s>"], best.attention);
  } else {
    parts.heatmap.replaceChildren();
  }
}

// The search of one sentence, step by step: at each step the candidates the beam search ranked
// (`Translator.explain`'s steps: tokens, parent, log_prob, status, slot, attention), one chosen
// candidate's attention so far drawn as a heatmap. `parts`: the slider, its label, the
// candidates' table and the heatmap's container.
export class SearchReplay {
  constructor({slider, label, table, heatmap}) {
    Object.assign(this, {slider, label, table, heatmap});
    this.explanation = null;
    this.chosen = 0;
  }

  show(explanation) {
    this.explanation = explanation;
    this.slider.max = explanation.steps.length - 1;
    this.slider.value = 0;
    this.chosen = 0;
    this.draw();
  }

  move(by) {
    if (!this.explanation) return;
    this.slider.value = Math.max(0, Math.min(Number(this.slider.max), Number(this.slider.value) + by));
    this.draw();
  }

  // A candidate's tokens carry its history; its attention rows are found by walking back
  // through the parents (slot numbers of the previous step's kept candidates).
  attentionSoFar(step, index) {
    const rows = [];
    let candidate = this.explanation.steps[step][index];
    for (let t = step; t >= 0; t--) {
      rows.unshift(candidate.attention);
      if (t > 0) candidate = this.explanation.steps[t - 1].find((c) => c.slot === candidate.parent);
    }
    return rows;
  }

  draw() {
    if (!this.explanation) return;
    const {steps, source_tokens: sourceTokens} = this.explanation;
    const step = Number(this.slider.value);
    const candidates = steps[step];
    this.label.textContent = `step ${step + 1} of ${steps.length}`;
    this.chosen = Math.min(this.chosen, candidates.length - 1);
    const widest = Math.max(...candidates.flatMap((c) => c.attention)) || 1;
    this.table.replaceChildren(...candidates.map((candidate, index) => {
      const row = document.createElement("tr");
      row.className = index === this.chosen ? "selected" : "";
      row.innerHTML = `<td class="num">${index + 1}</td><td></td><td class="num">${candidate.log_prob.toFixed(3)}</td>` +
        `<td><span class="badge ${candidate.status}">${candidate.status}</span></td><td><span class="bars"></span></td>`;
      row.children[1].textContent = candidate.tokens.join(" ");
      row.querySelector(".bars").append(...candidate.attention.map((weight, col) => {
        const bar = document.createElement("span");
        bar.style.opacity = 0.1 + 0.9 * weight / widest;
        bar.title = `${sourceTokens[col]}: ${weight.toFixed(3)}`;
        return bar;
      }));
      row.addEventListener("click", () => { this.chosen = index; this.draw(); });
      return row;
    }));
    const candidate = candidates[this.chosen];
    drawHeatmap(this.heatmap, sourceTokens, candidate.tokens, this.attentionSoFar(step, this.chosen));
  }
}
