// The operator console's page: the live stream over one websocket, the controls as POSTs with the token.
// No build step, no library: frames are JPEG blobs in <img>, the curves a <canvas>.
"use strict";

const TOKEN = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const WINDOW = 20; // episodes in the rolling success and intervention rates
const KEYS = { s: "success", f: "failure", h: "hold", r: "release" };
// what tests and the benchmark read: frames drawn per camera, their stamps, camera-to-screen latencies (ms)
const state = (window.robotRlConsole = { frames: {}, stamps: {}, latencies: [], telemetry: null, records: [] });

const $ = (id) => document.getElementById(id);
const fmt = (v, digits = 3) => (v === null || v === undefined ? "-" : Number(v).toFixed(digits));

function say(text, error = false) {
  $("message").textContent = text;
  $("message").className = error ? "error" : "";
}

function cameraFigure(name) {
  let img = $("cam-" + name);
  if (img) return img;
  const noCameras = $("no-cameras");
  if (noCameras) noCameras.remove();
  const figure = document.createElement("figure");
  img = document.createElement("img");
  img.id = "cam-" + name;
  img.alt = name;
  const caption = document.createElement("figcaption");
  caption.id = "cap-" + name;
  figure.append(img, caption);
  $("cameras").append(figure);
  return img;
}

function onFrame(buffer) {
  const length = new DataView(buffer).getUint16(0);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 2, length)));
  const img = cameraFigure(header.camera);
  const url = URL.createObjectURL(new Blob([new Uint8Array(buffer, 2 + length)], { type: "image/jpeg" }));
  img.onload = () => {
    const old = img.dataset.url;
    img.dataset.url = url;
    if (old) URL.revokeObjectURL(old);
    const now = Date.now() / 1000;
    const age = now - header.stamp; // wall-clock stamps only: in sim time the stamp is the sim's clock
    state.frames[header.camera] = (state.frames[header.camera] || 0) + 1;
    state.stamps[header.camera] = header.stamp;
    if (age >= 0 && age < 60) {
      state.latencies.push(age * 1000);
      if (state.latencies.length > 10000) state.latencies.splice(0, 5000);
    }
    $("cap-" + header.camera).textContent =
      `${header.camera}  ${img.naturalWidth}x${img.naturalHeight}  stamp ${header.stamp.toFixed(3)} s` +
      (age >= 0 && age < 60 ? `  age ${(age * 1000).toFixed(0)} ms` : "");
  };
  img.src = url;
}

function onTelemetry(t) {
  state.telemetry = t;
  const driver = $("driver");
  driver.textContent = t.driver;
  driver.className = "badge " + t.driver;
  $("violations").textContent = t.violations.length ? t.violations.join(" ") : "no flags";
  $("pose").textContent = t.pose ? t.pose.map((v) => fmt(v)).join(", ") : "-";
  $("target").textContent = t.target ? t.target.map((v) => fmt(v)).join(", ") : "-";
  $("twist").textContent = fmt(t.twist, 2) + (t.intervention ? " (operator drives)" : "");
  $("risk").textContent = fmt(t.risk);
  $("probability").textContent = fmt(t.probability);
  $("learner").textContent = t.learner ? `${t.learner.updates} updates, ${t.learner.online} online steps` : "-";
  if (t.records && t.records.length) {
    state.records.push(...t.records);
    const last = state.records[state.records.length - 1];
    $("episode").textContent =
      last.kind === "paused"
        ? `paused: ${last.topic}`
        : `${last.kind} ${last.episode}: ` +
          (last.kind === "eval"
            ? `success ${fmt(last.success_rate, 2)}`
            : `${last.success ? "success" : "no success"}, return ${fmt(last.return, 2)}, ` +
              `${last.length} steps, ${last.interventions} taken over`);
    drawCurves();
  }
}

function rolling(records, value) {
  // [env_steps, mean of value over the last WINDOW records] for each record
  return records.map((r, i) => {
    const window = records.slice(Math.max(0, i + 1 - WINDOW), i + 1);
    return [r.env_steps, value(window)];
  });
}

function drawCurves() {
  const canvas = $("curves");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 30;
  ctx.clearRect(0, 0, w, h);
  const train = state.records.filter((r) => r.kind === "train");
  const evals = state.records.filter((r) => r.kind === "eval");
  const series = [
    ["eval success", "#66bb6a", evals.map((r) => [r.env_steps, r.success_rate])],
    ["train success", "#2e7d32", rolling(train, (rs) => rs.filter((r) => r.success).length / rs.length)],
    ["intervention rate", "#ffa726",
      rolling(train, (rs) => rs.reduce((a, r) => a + r.interventions, 0) / Math.max(1, rs.reduce((a, r) => a + r.length, 0)))],
  ];
  const xmax = Math.max(1, ...state.records.map((r) => r.env_steps || 0));
  const x = (v) => pad + ((w - 2 * pad) * v) / xmax;
  const y = (v) => h - pad - (h - 2 * pad) * v;
  ctx.strokeStyle = "#555";
  ctx.strokeRect(pad, pad, w - 2 * pad, h - 2 * pad);
  ctx.fillStyle = "#aaa";
  ctx.font = "11px sans-serif";
  ctx.fillText("1", 8, y(1) + 4);
  ctx.fillText("0", 8, y(0) + 4);
  ctx.fillText(`${xmax} env steps`, w - pad - 80, h - 8);
  series.forEach(([name, colour, points], i) => {
    ctx.strokeStyle = ctx.fillStyle = colour;
    ctx.fillText(name, pad + 5 + i * 130, pad - 10);
    ctx.beginPath();
    points.forEach(([px, py], j) => (j ? ctx.lineTo(x(px), y(py)) : ctx.moveTo(x(px), y(py))));
    ctx.stroke();
    points.forEach(([px, py]) => ctx.fillRect(x(px) - 1.5, y(py) - 1.5, 3, 3));
  });
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/ws?token=${encodeURIComponent(TOKEN)}`);
  ws.binaryType = "arraybuffer";
  ws.onopen = () => ($("connection").textContent = "live");
  ws.onmessage = (event) => {
    if (typeof event.data !== "string") return onFrame(event.data);
    const msg = JSON.parse(event.data);
    if (msg.type === "telemetry") onTelemetry(msg);
  };
  ws.onclose = () => {
    $("connection").textContent = TOKEN ? "disconnected: retrying" : "no token: open the address the console printed";
    setTimeout(connect, 1000);
  };
}

async function control(action) {
  try {
    const response = await fetch(`/api/${action}`, { method: "POST", headers: { "X-Console-Token": TOKEN } });
    if (response.ok) say(`${action}: sent`);
    else say(`${action}: refused (${response.status} ${(await response.text()).trim()})`, true);
  } catch (error) {
    say(`${action}: ${error}`, true);
  }
}

document.querySelectorAll("button[data-action]").forEach((b) => (b.onclick = () => control(b.dataset.action)));
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.altKey || event.metaKey || event.repeat) return;
  const action = KEYS[event.key.toLowerCase()];
  if (action) {
    event.preventDefault();
    control(action);
  }
});
drawCurves();
connect();
