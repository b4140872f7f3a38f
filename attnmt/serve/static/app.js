// The attnmt page: sends the sentence to POST /v1/translate with attention on, then shows
// the best translation, the n-best list and the attention weights of the best hypothesis as
// a table: source pieces across, target pieces down, each cell shaded by its weight.
"use strict";

const $ = (id) => document.getElementById(id);

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

async function showModel() {
  const response = await api("/v1/health");
  const model = await response.json();
  if (!response.ok) throw new Error(model.error);
  $("direction").textContent =
    `${model.src_lang} → ${model.tgt_lang} · ${model.parameters.toLocaleString()} parameters`;
  $("source").placeholder = model.src_lang === "zh" ? "输入一个中文句子" : "Type an English sentence";
  $("beam").max = model.limits.max_beam_size;
  $("beam").value = model.limits.default_beam_size;
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
    const response = await api("/v1/translate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error);
    show(answer.translations[0]);
  } catch (error) {
    $("error").textContent = error.message;
  } finally {
    $("submit").disabled = false;
  }
}

function show(translation) {
  $("result").hidden = false;
  $("translation").textContent = translation.text;
  const list = $("nbest-list");
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
  drawHeatmap(translation.source_pieces, best ? best.target_pieces : [], best ? best.attention : []);
}

// weights[t][s]: how much target piece t attended to source piece s (a row sums to 1, or
// less with a local-p window).
function drawHeatmap(sourcePieces, targetPieces, weights) {
  const table = $("heatmap");
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
      cell.className = "cell";
      cell.dataset.weight = weight;
      cell.style.background = `rgba(30, 80, 200, ${weight})`;
      cell.title = `${piece} → ${sourcePiece}: ${weight.toFixed(3)}`;
      cell.onmouseenter = () => { $("readout").textContent = cell.title; };
    });
  });
}

$("form").addEventListener("submit", translate);
showModel().catch((error) => { $("error").textContent = `cannot reach the service: ${error}`; });
