// Greedy and beam search in the browser, over an export's three ONNX graphs run by onnxruntime-web.
//
// The twin of `attnmt.search` (`greedy.greedy`, `beam.beam_search`, without steering rules) for one
// sentence, step for step: the same
// length limit floor(a * S) + b (EOS forced at it), PAD and BOS never generated, beam search's
// 2K candidates of which those ending in EOS among the first K finish (scored with the GNMT
// length penalty ((5 + |Y|) / 6) ** alpha), the best K others living on, a sentence done once K
// have finished. Sums are rounded to float32 as torch's are (Math.fround), and ties go to the
// lower index as torch's max and topk give them, so outputs equal Python's except where two
// scores tie within float32 rounding of different kernels.
"use strict";

export const PAD = 0, UNK = 1, BOS = 2, EOS = 3;
const f32 = Math.fround;

// Each sentence's output limit in tokens, EOS included: floor(a * S) + b, at most `cap`
// (`search.options.max_lengths`).
export function lengthLimit(sourceLength, {max_length_a: a, max_length_b: b, max_length: cap}) {
  const limit = Math.floor(f32(f32(sourceLength) * f32(a))) + b;
  return cap == null ? limit : Math.min(limit, cap);
}

// GNMT's length penalty in float32, as `search.options.length_penalty` computes it
export function lengthPenalty(length, alpha) {
  return f32(Math.pow(f32((5 + length) / 6), alpha));
}

// A tensor's rows `rows` along its batch axis `axis` (0 or 1), as a new tensor: how the
// encoder output is widened to K beams and the decoder state follows the beams it extends.
function gatherRows(ort, tensor, axis, rows) {
  const dims = tensor.dims;
  const outer = dims.slice(0, axis).reduce((a, b) => a * b, 1);
  const inner = dims.slice(axis + 1).reduce((a, b) => a * b, 1);
  const data = new tensor.data.constructor(outer * rows.length * inner);
  for (let o = 0; o < outer; o++) {
    rows.forEach((row, j) => {
      const from = (o * dims[axis] + row) * inner;
      data.set(tensor.data.subarray(from, from + inner), (o * rows.length + j) * inner);
    });
  }
  const shape = dims.slice();
  shape[axis] = rows.length;
  return new ort.Tensor(tensor.type, data, shape);
}

// The batch axis of each part of the decoder state: hidden and cell (L, B, H), feed (B, H)
const STATE_BATCH_AXIS = {hidden: 1, cell: 1, feed: 0};

// The step interface (`search.options.StepModel`) over onnxruntime-web sessions of encoder.onnx,
// init.onnx and step.onnx, for a batch of rows of one sentence.
export class OnnxModel {
  constructor(ort, sessions, stateNames) {
    Object.assign(this, {ort, sessions, stateNames});
  }

  static async load(ort, folder, stateNames, options = {}) {
    const sessions = {};
    for (const name of ["encoder", "init", "step"]) {
      sessions[name] = await ort.InferenceSession.create(`${folder}/${name}.onnx`, options);
    }
    return new OnnxModel(ort, sessions, stateNames);
  }

  int64(values, dims) {
    return new this.ort.Tensor("int64", BigInt64Array.from(values, BigInt), dims);
  }

  // ids: the source token ids of one sentence -> its encoder output, `rows` copies of it
  async encode(ids, rows = 1) {
    const outputs = await this.sessions.encoder.run({src: this.int64(ids, [1, ids.length]),
                                                     src_lengths: this.int64([ids.length], [1])});
    const copies = new Array(rows).fill(0);
    return {
      memory: gatherRows(this.ort, outputs.memory, 0, copies),  // (R, S, H_enc)
      mask: gatherRows(this.ort, outputs.mask, 0, copies),  // (R, S)
      projected_keys: gatherRows(this.ort, outputs.projected_keys, 0, copies),
      final_hidden: gatherRows(this.ort, outputs.final_hidden, 1, copies),  // (L, R, H_enc)
      length: ids.length,
    };
  }

  async initState(source) {
    const outputs = await this.sessions.init.run({final_hidden: source.final_hidden});
    return Object.fromEntries(this.stateNames.map((name) => [name, outputs[name]]));
  }

  // prev: the R rows' previous tokens -> {logProbs (R*V), vocabSize, attention (R*S), state}
  async step(prev, source, state) {
    const feeds = {prev_tokens: this.int64(prev, [prev.length]), memory: source.memory,
                   projected_keys: source.projected_keys, mask: source.mask};
    for (const name of this.stateNames) feeds[name] = state[name];
    const outputs = await this.sessions.step.run(feeds);
    return {
      logProbs: outputs.log_probs.data,  // (R, V) float32
      vocabSize: outputs.log_probs.dims[1],
      attention: outputs.attention.data,  // (R, S)
      state: Object.fromEntries(this.stateNames.map((name) => [name, outputs[`new_${name}`]])),
    };
  }

  reorder(state, rows) {
    return Object.fromEntries(this.stateNames.map((name) => [
      name, gatherRows(this.ort, state[name], STATE_BATCH_AXIS[name], rows)]));
  }
}

function row(array, index, width) {
  return Array.from(array.subarray(index * width, (index + 1) * width));
}

// A hypothesis as Python's `search.hypotheses.Hypothesis` (`hypothesis_of`): tokens without EOS,
// attention one row per token with EOS
function hypothesis(tokens, attention, logProb, score) {
  const end = tokens.indexOf(EOS);
  const kept = end < 0 ? tokens.length : end + 1;
  return {tokens: tokens.slice(0, end < 0 ? tokens.length : end), attention: attention.slice(0, kept),
          log_prob: logProb, score};
}

// Greedy search of one sentence (`search.greedy.greedy`): the most probable token at each step.
export async function greedy(model, ids, options) {
  const source = await model.encode(ids);
  let state = await model.initState(source);
  const limit = lengthLimit(ids.length, options);
  const tokens = [], attention = [];
  let prev = BOS, logProb = 0;
  for (let step = 0; step < limit; step++) {
    const out = await model.step([prev], source, state);
    const scores = out.logProbs;
    scores[PAD] = -Infinity;
    scores[BOS] = -Infinity;
    let best = 0;
    for (let v = 1; v < out.vocabSize; v++) if (scores[v] > scores[best]) best = v;
    if (step + 1 >= limit) best = EOS;  // the last allowed token is EOS
    tokens.push(best);
    attention.push(row(out.attention, 0, ids.length));
    logProb = f32(logProb + scores[best]);
    state = out.state;
    if (best === EOS) break;
    prev = best;
  }
  return [hypothesis(tokens, attention, logProb, logProb)];
}

// The `count` best of `values` by value, ties to the lower index (torch's topk): their indices.
function topIndices(values, count) {
  const kept = [];  // indices, best first
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (kept.length === count && !(value > values[kept[count - 1]])) continue;
    let at = kept.length;
    while (at > 0 && value > values[kept[at - 1]]) at--;
    kept.splice(at, 0, i);
    if (kept.length > count) kept.pop();
  }
  return kept;
}

// Beam search of one sentence (`search.beam.beam_search`): its n-best hypotheses, best first. With
// `observe`, every step's candidates are reported as `Translator.explain` records them.
export async function beamSearch(model, ids, options, observe = null) {
  const beam = options.beam_size, alpha = options.length_penalty, width = ids.length;
  const source = await model.encode(ids, beam);
  let state = await model.initState(source);
  const limit = lengthLimit(width, options);
  let live = Array.from({length: beam}, (_, k) => ({logProb: k === 0 ? 0 : -Infinity, tokens: [], attention: []}));
  let finished = [];  // the best K finished, best first: {score, logProb, tokens, attention}
  let count = 0;
  for (let step = 0; step < limit; step++) {
    const out = await model.step(live.map((h) => (h.tokens.length ? h.tokens.at(-1) : BOS)), source, state);
    const vocab = out.vocabSize, scores = out.logProbs;
    const last = step + 1 >= limit;
    const totals = new Float32Array(beam * vocab);  // (K, V) summed log-probabilities
    for (let k = 0; k < beam; k++) {
      for (let v = 0; v < vocab; v++) {
        const generable = v !== PAD && v !== BOS && (!last || v === EOS);
        totals[k * vocab + v] = generable ? live[k].logProb + scores[k * vocab + v] : -Infinity;
      }
    }
    // `never_generated` and EOS forced at the limit, then the 2K best (`beam_search`'s topk);
    // histories are copied only for the candidates that finish or live on (`grown`), not all 2K
    const candidates = topIndices(totals, 2 * beam).map((flat, rank) => {
      const origin = Math.floor(flat / vocab), token = flat % vocab;
      return {origin, token, rank, logProb: totals[flat], stepAttention: row(out.attention, origin, width)};
    });
    const grown = (c) => ({...c, tokens: [...live[c.origin].tokens, c.token],
                           attention: [...live[c.origin].attention, c.stepAttention]});
    const penalty = lengthPenalty(step + 1, alpha);
    // EOS among the top K finishes and joins the finished set (`hypotheses.merge_finished`)
    const finishing = candidates.filter((c) => c.token === EOS && c.rank < beam && c.logProb > -Infinity);
    const pool = [...finished, ...finishing.map((c) => ({...grown(c), score: f32(c.logProb / penalty)}))];
    finished = topIndices(pool.map((h) => h.score), beam).map((i) => pool[i]);
    count += finishing.length;
    const done = count >= beam || last;
    // the best K not ending in EOS live on (`beam_search`'s `pick`); a done sentence keeps none
    const picks = done ? [] : topIndices(candidates.map((c) => (c.token === EOS ? -Infinity : c.logProb)), beam);
    if (observe) observe({step, candidates, picks, finishing, penalty});
    if (done) break;
    live = picks.map((i) => grown(candidates[i]));
    state = model.reorder(out.state, live.map((c) => c.origin));
  }
  return finished.filter((h) => h.score > -Infinity).slice(0, options.n_best ?? 1)
    .map((h) => hypothesis(h.tokens, h.attention, h.logProb, h.score));
}
