// The arena page: fills text nodes only (textContent), never markup; frames come as PNG from the server.
"use strict";
const token = new URLSearchParams(location.search).get("t") || "";
const q = (path) => path + (path.includes("?") ? "&" : "?") + "t=" + encodeURIComponent(token);
let pair = null, frame = 0, playing = true, busy = false, longest = 1;
const roles = ["context", "object", "reference", "left", "right"];

function text(id, value) { document.getElementById(id).textContent = value; }

function show(p) {
  pair = p; frame = 0; busy = false;
  longest = Math.max(1, ...roles.map((r) => p.frames[r] || 0));
  text("question", p.question);
  text("prompt", p.prompt || "");
  text("progress", `${p.progress.votes} votes (${p.progress.mine} yours), ${p.progress.covered} of ${p.progress.cases} cases covered`);
  document.getElementById("reference-box").hidden = !p.frames.reference;
  document.getElementById("object-box").hidden = !p.frames.object;
  text("left-name", p.runs ? "left: " + p.runs.left : "left");
  text("right-name", p.runs ? "right: " + p.runs.right : "right");
  const scrub = document.getElementById("scrub");
  scrub.max = String(longest - 1);
  document.body.dataset.pair = p.pair;
  draw();
}

function draw() {
  if (!pair) return;
  for (const r of roles) {
    const n = pair.frames[r] || 0;
    if (!n) continue;
    // one clock for every player: each shows the frame at the same fraction of its length
    const i = longest > 1 ? Math.round((frame * (n - 1)) / (longest - 1)) : 0;
    document.getElementById(r).src = q(`/api/frame/${encodeURIComponent(pair.pair)}/${r}/${i}`);
  }
  document.getElementById("scrub").value = String(frame);
}

async function load(url, options) {
  let response, body;
  try {
    response = await fetch(q(url), options);
    body = await response.json();
  } catch (e) {
    text("status", "the server did not answer; your vote may not be saved, try again"); busy = false; return;
  }
  if (!response.ok) { text("status", body.error || `error ${response.status}`); busy = false; return; }
  text("status", "");
  show(body);
}

async function vote(answer) {
  if (!pair || busy) return;
  busy = true;
  await load("/api/vote", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ pair: pair.pair, answer }),
  });
}

const keys = { ArrowLeft: "left", 1: "left", ArrowRight: "right", 2: "right", 3: "tie", t: "tie", 4: "both_wrong", b: "both_wrong" };
document.addEventListener("keydown", (e) => {
  if (e.key === " ") { playing = !playing; text("play", playing ? "pause (space)" : "play (space)"); e.preventDefault(); return; }
  if (keys[e.key]) { e.preventDefault(); vote(keys[e.key]); }
});
document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("[data-answer]")) b.addEventListener("click", () => vote(b.dataset.answer));
  document.getElementById("play").addEventListener("click", () => { playing = !playing; });
  document.getElementById("scrub").addEventListener("input", (e) => { frame = Number(e.target.value); draw(); });
  setInterval(() => { if (playing && pair && longest > 1) { frame = (frame + 1) % longest; draw(); } }, 250);
  load("/api/next");
});
