// The attnmt page: sends the box's lines (a paragraph each) to POST /v1/translate with
// attention on and split_sentences on, once for each model the service serves (/v1/health
// lists them), and shows the models side by side: for each line, its translation (its
// sentences' joined), and for each sentence its n-best list and the attention weights of its
// best hypothesis as a table: source pieces across, target pieces down, each cell shaded by
// its weight, the cells of the hard alignment outlined.
"use strict";

const $ = (id) => document.getElementById(id);
let models = []; // /v1/health's models, the default first

// A service started with a token answers 401 without it: ask once, keep it for this tab.
async function api(path, options = {}) {
  for (let asked = false; ; asked = true) {
    const token = sessionStorage.getItem("attnmt-token");
    const headers = { ...options.headers };
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path, { ...options, headers });
    if (response.status !== 401 || asked) return response;
    const given = window.prompt("This service needs its token:");
    if (!given) return response;
    sessionStorage.setItem("attnmt-token", given.trim());
  }
}

async function showModels() {
  const response = await api("/v1/health");
  const health = await response.json();
  if (!response.ok) throw new Error(health.error);
  models = health.models;
  const about = models.length === 1
    ? `${health.parameters.toLocaleString()} parameters`
    : models.map((model) => model.name).join(" · ");
  $("direction").textContent = `${health.src_lang} → ${health.tgt_lang} · ${about}`;
  $("source").placeholder = health.src_lang === "zh"
    ? "输入中文，每行一段"
    : "Type English, a paragraph a line";
  $("beam").max = health.limits.max_beam_size;
  $("beam").value = health.limits.default_beam_size;
  $("panels").replaceChildren(...models.map(panel));
}

// The panel of a model: its heading, then where its results go.
function panel(model) {
  const section = $("panel").content.firstElementChild.cloneNode(true);
  section.dataset.model = model.name;
  section.querySelector(".model").textContent = models.length === 1
    ? "Translation"
    : `${model.name} · ${model.src_lang} → ${model.tgt_lang} · ` +
      `${model.parameters.toLocaleString()} parameters`;
  return section;
}

async function translate(event) {
  event.preventDefault();
  $("error").textContent = "";
  $("submit").disabled = true;
  // Empty until /v1/health has answered: then the service's own default beam.
  const beam = $("beam").value === "" ? null : Number($("beam").value);
  // A paragraph a line; the service splits each into sentences (a newline is never an error).
  const lines = $("source").value.split("\n").map((line) => line.trim()).filter((line) => line);
  const request = {
    text: lines,
    beam_size: beam,
    n_best: beam === null ? 1 : Math.min(Number($("nbest").value), beam),
    attention: true,
    split_sentences: true,
  };
  try {
    if (models.length === 0) throw new Error("the models are not loaded yet");
    const answers = await Promise.all(models.map((model) => translateWith(model, request)));
    const failed = answers.filter((answer) => answer.error);
    if (failed.length < answers.length) $("result").hidden = false;
    $("error").textContent = failed.map((answer) => answer.error).join("; ");
  } catch (error) {
    $("error").textContent = error.message;
  } finally {
    $("submit").disabled = false;
  }
}

// Ask one model and show its answer in its panel; {error} where it refused.
async function translateWith(model, request) {
  const section = document.querySelector(`.panel[data-model="${CSS.escape(model.name)}"]`);
  try {
    const response = await api("/v1/translate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...request, model: model.name }),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error);
    show(section, answer.translations, model === models[0]);
    return {};
  } catch (error) {
    clear(section); // not the previous sentence's answer beside the others' new ones
    return { error: models.length === 1 ? error.message : `${model.name}: ${error.message}` };
  }
}

function clear(section) {
  section.querySelector(".lines").replaceChildren();
}

// One model's answer: a block per line (paragraph) with its translation, then each of its
// sentences. The default model's first line keeps the ids of the one-sentence page:
// #translation, and its first sentence's #nbest-list and #heatmap.
function show(section, paragraphs, first) {
  section.querySelector(".lines").replaceChildren(...paragraphs.map((paragraph) => {
    const block = $("line").content.firstElementChild.cloneNode(true);
    block.querySelector(".translation").textContent = paragraph.text;
    const several = paragraph.sentences.length > 1;
    block.querySelector(".sentences").replaceChildren(
      ...paragraph.sentences.map((translation) => sentence(translation, several)),
    );
    return block;
  }));
  if (first) {
    for (const name of ["translation", "nbest-list", "heatmap"]) {
      const element = section.querySelector(`.${name}`);
      if (element) element.id = name;
    }
  }
}

// One sentence's n-best list and attention (headed by the sentence where its line has several).
function sentence(translation, several) {
  const block = $("sentence").content.firstElementChild.cloneNode(true);
  const heading = block.querySelector(".sentence-source");
  heading.hidden = !several;
  heading.textContent = `${translation.source} → ${translation.text}`;
  const list = block.querySelector(".nbest-list");
  for (const hypothesis of translation.hypotheses) {
    const item = document.createElement("li");
    item.textContent = hypothesis.text;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = hypothesis.score.toFixed(3);
    item.append(score);
    list.append(item);
  }
  const best = translation.hypotheses[0];
  drawHeatmap(
    block.querySelector(".heatmap"),
    translation.source_pieces,
    best ? best.target_pieces : [],
    best ? best.attention : [],
    best ? best.alignment : [],
  );
  return block;
}

// weights[t][s]: how much target piece t attended to source piece s (a row sums to 1, or
// less with a local-p window). alignment: the hard links as [source piece, target piece].
function drawHeatmap(table, sourcePieces, targetPieces, weights, alignment) {
  const linked = new Set(alignment.map(([s, t]) => `${t} ${s}`));
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  head.append(document.createElement("th"));
  for (const piece of sourcePieces) {
    const th = document.createElement("th");
    th.textContent = piece;
    head.append(th);
  }
  const body = table.createTBody();
  targetPieces.forEach((piece, t) => {
    const row = body.insertRow();
    const th = document.createElement("th");
    th.textContent = piece;
    row.append(th);
    sourcePieces.forEach((sourcePiece, s) => {
      const weight = weights[t][s];
      const cell = row.insertCell();
      cell.className = linked.has(`${t} ${s}`) ? "cell link" : "cell";
      cell.dataset.weight = weight;
      cell.style.background = `rgba(30, 80, 200, ${weight})`;
      cell.title = `${piece} → ${sourcePiece}: ${weight.toFixed(3)}` +
        (linked.has(`${t} ${s}`) ? " (aligned)" : "");
      cell.onmouseenter = () => { $("readout").textContent = cell.title; };
    });
  });
}

$("form").addEventListener("submit", translate);
showModels().catch((error) => { $("error").textContent = `cannot reach the service: ${error}`; });
