// The operator console's page: the live stream over one websocket, the controls as POSTs with the token.
// No build step, no library: frames are JPEG blobs in <img>, the curves a <canvas>.
"use strict";

const TOKEN = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const WINDOW = 20; // episodes in the rolling success and intervention rates
const STALE = 2; // s without a new frame after which a camera's caption says so
// every control's key (the page lists them); Q (shift+q) for stop, so that a stray q does not end the run
const KEYS = { s: "success", f: "failure", h: "hold", r: "release", p: "pause", u: "resume", c: "checkpoint", Q: "stop" };
// what tests and the benchmark read: frames drawn per camera, their stamps, camera-to-screen latencies (ms); the
// policy's view: frames drawn per camera, their stamps
const state = (window.robotRlConsole = {
  frames: {}, stamps: {}, latencies: [], telemetry: null, records: [], episodes: [], episode: null, episodeFrames: 0,
  policyFrames: {}, policyStamps: {},
});

const $ = (id) => document.getElementById(id);
const fmt = (v, digits = 3) => (v === null || v === undefined ? "-" : Number(v).toFixed(digits));
const count = (n, unit) => `${Number(n).toLocaleString("en")} ${unit}${n === 1 ? "" : "s"}`; // 1 env step, 2 env steps

function say(text, error = false) {
  $("message").textContent = text;
  $("message").className = error ? "error" : "";
}

function cameraFigure(name, view) {
  // one figure per camera: the raw view (cam-<name>) and, beside it, the policy's (pol-<name>, nearest-neighbour)
  const id = (view === "policy" ? "pol-" : "cam-") + name;
  let img = $(id);
  if (img) return img;
  const noCameras = $("no-cameras");
  if (noCameras) noCameras.remove();
  let figure = $("fig-" + name);
  if (!figure) {
    figure = document.createElement("figure");
    figure.id = "fig-" + name;
    $("cameras").append(figure);
  }
  const part = document.createElement("div");
  part.className = "view " + view;
  img = document.createElement("img");
  img.id = id;
  img.hidden = true; // shown once its first frame is decoded: never an empty or broken image
  img.alt = `${name}, ${view === "policy" ? "as the policy sees it" : "as the camera sends it"}`;
  const caption = document.createElement("div");
  caption.className = "caption";
  caption.id = (view === "policy" ? "polcap-" : "cap-") + name;
  part.append(img, caption);
  if (view !== "policy") {
    const stale = document.createElement("div"); // filled from the telemetry: the camera's newest frame is old
    stale.className = "stale";
    stale.id = "stale-" + name;
    part.append(stale);
  }
  if (view === "policy") figure.append(part);
  else figure.prepend(part);
  return img;
}

function onFrame(buffer) {
  const length = new DataView(buffer).getUint16(0);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 2, length)));
  const policy = header.view === "policy";
  const img = cameraFigure(header.camera, header.view);
  const type = policy ? "image/png" : "image/jpeg";
  const blob = new Blob([new Uint8Array(buffer, 2 + length)], { type });
  showDecoded(img, blob, (width, height) => {
    if (policy) {
      state.policyFrames[header.camera] = (state.policyFrames[header.camera] || 0) + 1;
      state.policyStamps[header.camera] = header.stamp;
      $("polcap-" + header.camera).textContent =
        `as the policy sees it  ${width}x${height}  stamp ${header.stamp.toFixed(3)} s`;
      return;
    }
    const now = Date.now() / 1000;
    const age = now - header.stamp; // wall-clock stamps only: in sim time the stamp is the sim's clock
    state.frames[header.camera] = (state.frames[header.camera] || 0) + 1;
    state.stamps[header.camera] = header.stamp;
    if (age >= 0 && age < 60) {
      state.latencies.push(age * 1000);
      if (state.latencies.length > 10000) state.latencies.splice(0, 5000);
    }
    $("cap-" + header.camera).textContent =
      `${header.camera}  ${width}x${height}  stamp ${header.stamp.toFixed(3)} s` +
      (age >= 0 && age < 60 ? `  age ${(age * 1000).toFixed(0)} ms` : "");
  });
}

let arrivals = 0; // frames in the order they reached the page (not their stamps: a restarted sim's clock restarts)

function showDecoded(img, blob, onShown) {
  // Decode the image off-screen, then swap it in: the <img> on the page never shows a half-loaded (0x0) frame,
  // a frame decoded after a newer one is dropped, and every blob address is revoked once nothing shows it (a
  // session of hours at 30 fps per camera keeps no dead frames).
  const order = ++arrivals;
  const url = URL.createObjectURL(blob);
  const next = new Image();
  next.src = url;
  next.decode().then(
    () => {
      if (order < Number(img.dataset.order ?? 0)) return URL.revokeObjectURL(url);
      const old = img.dataset.url;
      img.dataset.order = order;
      img.dataset.url = url;
      img.src = url; // already decoded: the element's size is the frame's at once
      img.hidden = false;
      if (old) URL.revokeObjectURL(old);
      onShown(next.naturalWidth, next.naturalHeight);
    },
    () => URL.revokeObjectURL(url), // not an image (or superseded): nothing to show, nothing kept
  );
}

function showCameras(cameras) {
  // what the console hears of each camera: the placeholder until a frame is drawn says which it listens to and
  // whether any frame came; a drawn camera whose newest frame is old says so under its (last) frame
  const names = Object.keys(cameras);
  const noCameras = $("no-cameras");
  if (noCameras) {
    const heard = names.filter((n) => cameras[n].frames > 0);
    noCameras.textContent = !names.length
      ? "no camera in the graph yet (the console looks for camera/<name>/color/image_raw)"
      : heard.length
        ? heard.map((n) => `${n}: ${count(cameras[n].frames, "frame")} heard, the newest ${cameras[n].age} s ago`).join("; ")
        : `listening to ${names.join(", ")}: no frame yet`;
  }
  names.forEach((n) => {
    const stale = $("stale-" + n);
    if (stale) stale.textContent = cameras[n].age > STALE ? `no new frame for ${cameras[n].age} s` : "";
  });
}

function showNodes(nodes) {
  // the session's nodes the console heard claim their names: gone ones, and ones started again, say so
  const items = nodes.map((n) => {
    const item = document.createElement("span");
    item.className = "node " + (n.up ? "up" : "gone");
    item.dataset.node = n.name;
    const again = n.restarts ? `, started again ${n.restarts}x (last at ${new Date(n.started * 1000).toLocaleTimeString()})` : "";
    item.textContent = n.up ? n.name + again : `${n.name}: gone for ${n.gone_for} s${again}`;
    return item;
  });
  $("nodes").replaceChildren(...(items.length ? items : ["-"]));
}

function onTelemetry(t) {
  state.telemetry = t;
  const driver = $("driver");
  driver.textContent = t.driver;
  driver.className = "badge " + t.driver.replaceAll(" ", "-");
  showCameras(t.cameras);
  showNodes(t.nodes);
  $("violations").textContent = t.violations.length ? t.violations.join(" ") : "no flags";
  $("pose").textContent = t.pose ? t.pose.map((v) => fmt(v)).join(", ") : "-";
  $("target").textContent = t.target ? t.target.map((v) => fmt(v)).join(", ") : "-";
  $("twist").textContent = fmt(t.twist, 2) + (t.intervention ? " (operator drives)" : "");
  $("risk").textContent = fmt(t.risk);
  $("probability").textContent = fmt(t.probability);
  $("learner").textContent = t.learner ? `${t.learner.updates} updates, ${t.learner.online} online steps` : "-";
  const run = t.run;
  $("updates-rate").textContent = fmt(run.updates_per_s, 1);
  $("env-rate").textContent = fmt(run.env_steps_per_s, 1);
  $("replay").textContent =
    run.online_size === null || run.online_size === undefined ? "-" : `${run.online_size} online, ${run.demo_size} demo`;
  $("weights").textContent = run.weights === null || run.weights === undefined ? "-" : String(run.weights);
  $("paused").hidden = !t.paused;
  $("checkpoint").textContent = t.checkpoint
    ? `${t.checkpoint.reason}: ${t.checkpoint.online} online steps, ${t.checkpoint.updates} updates`
    : "-";
  if (t.records && t.records.length) {
    state.records.push(...t.records);
    const last = state.records[state.records.length - 1];
    $("episode").textContent =
      last.kind === "paused"
        ? `paused: ${last.topic}`
        : last.kind === "started"
        ? `actor ${last.restart ? `restarted (restart ${last.restart})` : "started"} at episode ${last.episode}`
        : `${last.kind} ${last.episode}: ` +
          (last.kind === "eval"
            ? `success ${fmt(last.success_rate, 2)}`
            : `${last.success ? "success" : "no success"}, return ${fmt(last.return, 2)}, ` +
              `${last.length} steps, ${last.interventions} taken over` + (last.stopped ? " (stopped)" : ""));
    drawCurves();
    if (t.records.some((r) => r.kind === "train" || r.kind === "demo")) loadEpisodes();
  }
}

// ---------------------------------------------------------------- the episode store: list, video, curves
async function get(path) {
  const response = await fetch(path, { headers: { "X-Console-Token": TOKEN } });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${(await response.text()).trim()}`);
  return response;
}

async function loadEpisodes() {
  try {
    const listing = await (await get("/api/episodes")).json();
    state.episodes = listing.episodes;
    const rows = listing.episodes.slice().reverse().map((e) => {
      const row = document.createElement("tr");
      row.className = "episode-row";
      row.dataset.index = e.index;
      const label = e.operator_label === undefined ? "" : e.operator_label ? "operator: success" : "operator: failure";
      [e.index, e.source, e.length, e.success ? "yes" : "no", fmt(e.return, 2), e.interventions, label].forEach(
        (v) => row.insertCell().append(String(v ?? "-")),
      );
      row.onclick = () => showEpisode(e.index);
      return row;
    });
    $("episode-rows").replaceChildren(...rows);
    $("episode-store").textContent = `${listing.store}: ${listing.episodes.length} episodes`;
  } catch (error) {
    $("episode-store").textContent = String(error);
  }
}

async function showEpisode(index) {
  const episode = await (await get(`/api/episodes/${index}`)).json();
  state.episode = episode;
  state.episodeFrames = 0;
  document.querySelectorAll(".episode-row").forEach((r) => r.classList.toggle("chosen", r.dataset.index == index));
  $("episode-view").hidden = false;
  if (!episode.cameras.length) $("episode-frame").hidden = true; // no camera: no frame (shown once one is decoded)
  $("episode-title").textContent =
    `episode ${episode.index} (${episode.name}): ${episode.action.length} steps, ` + (episode.cameras[0] || "no camera");
  drawEpisode(episode, 0);
  const slider = $("episode-step");
  slider.max = episode.action.length;
  slider.value = 0;
  slider.oninput = () => showStep(episode, Number(slider.value));
  await showStep(episode, 0);
  playEpisode(episode);
}

async function showStep(episode, step) {
  drawEpisode(episode, step);
  if (!episode.cameras.length) return;
  const blob = await (await get(`/api/episodes/${episode.index}/${episode.cameras[0]}/${step}`)).blob();
  if (state.episode !== episode) return; // another episode was chosen meanwhile
  showDecoded($("episode-frame"), blob, () => (state.episodeFrames += 1));
}

async function playEpisode(episode) {
  // the recorded frames once through at the control rate; the slider scrubs
  for (let step = 1; step <= episode.action.length && state.episode === episode; step++) {
    await new Promise((resolve) => setTimeout(resolve, 1000 / episode.fps));
    if (state.episode !== episode) return;
    $("episode-step").value = step;
    await showStep(episode, step);
  }
}

function drawEpisode(episode, cursor) {
  // actions (each dimension, -1..1) above, reward below, takeover steps shaded, the shown step as a line
  const canvas = $("episode-curves");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 24, half = (h - 3 * pad) / 2;
  const steps = Math.max(1, episode.action.length);
  const x = (t) => pad + ((w - 2 * pad) * t) / steps;
  ctx.clearRect(0, 0, w, h);
  ctx.fillStyle = "rgba(255, 167, 38, 0.25)";
  episode.intervened.forEach((on, t) => on && ctx.fillRect(x(t), pad, x(t + 1) - x(t), h - 2 * pad));
  const rmax = Math.max(1e-6, ...episode.reward.map(Math.abs));
  const panels = [
    [pad, (v) => v, episode.action[0] ? episode.action[0].map((_, d) => episode.action.map((a) => a[d])) : []],
    [2 * pad + half, (v) => v / rmax, [episode.reward]],
  ];
  const colours = ["#64b5f6", "#81c784", "#e57373", "#ffd54f", "#ba68c8", "#4dd0e1", "#f06292", "#eeeeee"];
  ctx.font = "11px sans-serif";
  panels.forEach(([top, scale, lines], p) => {
    ctx.strokeStyle = "#555";
    ctx.strokeRect(pad, top, w - 2 * pad, half);
    ctx.fillStyle = "#aaa";
    ctx.fillText(p ? `reward (max ${fmt(rmax, 2)})` : "actions", pad + 4, top + 12);
    lines.forEach((values, i) => {
      ctx.strokeStyle = p ? "#eeeeee" : colours[i % colours.length];
      ctx.beginPath();
      values.forEach((v, t) => {
        const px = x(t + 0.5), py = top + half / 2 - (half / 2) * scale(v);
        t ? ctx.lineTo(px, py) : ctx.moveTo(px, py);
      });
      ctx.stroke();
    });
  });
  ctx.strokeStyle = "#fff";
  ctx.beginPath();
  ctx.moveTo(x(cursor), pad);
  ctx.lineTo(x(cursor), h - pad);
  ctx.stroke();
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
  const steps = state.records.filter((r) => typeof r.env_steps === "number").map((r) => r.env_steps);
  const xmax = Math.max(1, ...steps);
  const x = (v) => pad + ((w - 2 * pad) * v) / xmax;
  const y = (v) => h - pad - (h - 2 * pad) * v;
  ctx.strokeStyle = "#555";
  ctx.strokeRect(pad, pad, w - 2 * pad, h - 2 * pad);
  ctx.fillStyle = "#aaa";
  ctx.font = "11px sans-serif";
  ctx.fillText("1", 8, y(1) + 4);
  ctx.fillText("0", 8, y(0) + 4);
  ctx.textAlign = "right";
  // the axis runs from 0 to the most env steps a record says; with no record yet it has no scale
  ctx.fillText(steps.length ? count(Math.max(...steps), "env step") : "env steps", w - pad, h - 8);
  ctx.textAlign = "left";
  if (!steps.length) ctx.fillText("no episode yet", pad + 8, h / 2);
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
$("keys").replaceChildren(
  ...Object.entries(KEYS).map(([key, action]) => {
    const item = document.createElement("li");
    item.dataset.action = action;
    item.innerHTML = `<kbd>${key === key.toUpperCase() ? "shift+" + key.toLowerCase() : key}</kbd> ${action}`;
    return item;
  }),
);
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.altKey || event.metaKey || event.repeat || event.target.tagName === "INPUT") return;
  const action = event.key === "Q" ? KEYS.Q : KEYS[event.key.toLowerCase()]; // a lone q is nothing
  if (action) {
    event.preventDefault();
    control(action);
  }
});
drawCurves();
connect();
loadEpisodes();
