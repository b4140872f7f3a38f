// The attnmt page: sends the sentence to POST /v1/translate with attention on, once for each
// model the service serves (/v1/health lists them), and shows the models side by side: each
// one's best translation, its n-best list and the attention weights of its best hypothesis as
// a table: source pieces across, target pieces down, each cell shaded by its weight, the cells
// of the hard alignment outlined.
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
  $("source").placeholder = health.src_lang === "zh" ? "输入一个中文句子" : "Type an English sentence";
  $("beam").max = health.limits.max_beam_size;
  $("beam").value = health.limits.default_beam_size;
  $("panels").replaceChildren(...models.map(panel));
}

// The panel of models[index]: its heading, then where its results go.
function panel(model, index) {
  const section = $("panel").content.firstElementChild.cloneNode(true);
  section.dataset.model = model.name;
  section.querySelector(".model").textContent = models.length === 1
    ? "Translation"
    : `${model.name} · ${model.src_lang} → ${model.tgt_lang} · ` +
      `${model.parameters.toLocaleString()} parameters`;
  if (index === 0) { // the ids of the one-model page
    section.querySelector(".translation").id = "translation";
    section.querySelector(".nbest-list").id = "nbest-list";
    section.querySelector(".heatmap").id = "heatmap";
  }
  return section;
}

async function translate(event) {
  event.preventDefault();
  $("error").textContent = "";
  $("submit").disabled = true;
  // Empty until /v1/health has answered: then the service's own default beam.
  const beam = $("beam").value === "" ? null : Number($("beam").value);
  const request = {
    text: [$("source").value.trim()],
    beam_size: beam,
    n_best: beam === null ? 1 : Math.min(Number($("nbest").value), beam),
    attention: true,
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
    show(section, answer.translations[0]);
    return {};
  } catch (error) {
    clear(section); // not the previous sentence's answer beside the others' new ones
    return { error: models.length === 1 ? error.message : `${model.name}: ${error.message}` };
  }
}

function clear(section) {
  section.querySelector(".translation").textContent = "";
  section.querySelector(".nbest-list").replaceChildren();
  section.querySelector(".heatmap").replaceChildren();
}

function show(section, translation) {
  section.querySelector(".translation").textContent = translation.text;
  const list = section.querySelector(".nbest-list");
  list.replaceChildren();
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
    section.querySelector(".heatmap"),
    translation.source_pieces,
    best ? best.target_pieces : [],
    best ? best.attention : [],
    best ? best.alignment : [],
  );
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
