// The page keeps a local copy of every widget (all namespaces) in sync with
// the server the way a Kubernetes informer does: list, then watch from the
// list's resourceVersion; on the end of a watch, watch again from the last
// resourceVersion seen (bookmarks advance it); on 410 Gone, list again.
"use strict";

const API = "/k8s/apis/example.dev/v1";
const widgets = new Map(); // "namespace/name" -> object
let resourceVersion = "";
let events = 0; // watch events applied
let lists = 0; // lists made: the first, and one after each 410 Gone

const $ = (id) => document.getElementById(id);
const colors = { red: "#e53e3e", green: "#38a169", blue: "#3182ce" };

function setState(state, text) {
  const el = $("state");
  el.className = state;
  el.textContent = text || state;
}

function key(obj) {
  return obj.metadata.namespace + "/" + obj.metadata.name;
}

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  return td;
}

function render() {
  const tbody = document.querySelector("#widgets tbody");
  const rows = [...widgets.values()].sort((a, b) => key(a).localeCompare(key(b)));
  tbody.replaceChildren(...rows.map((w) => {
    const tr = document.createElement("tr");
    tr.className = "widget";
    tr.dataset.namespace = w.metadata.namespace;
    tr.dataset.name = w.metadata.name;
    tr.dataset.color = w.spec.color || "";
    tr.dataset.size = w.spec.size;
    tr.dataset.resourceVersion = w.metadata.resourceVersion;
    tr.append(cell(w.metadata.namespace), cell(w.metadata.name));
    const color = cell(w.spec.color);
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colors[w.spec.color] || "#999";
    color.prepend(swatch);
    const size = cell("");
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = Math.min(w.spec.size, 100) * 4 + "px";
    bar.style.background = colors[w.spec.color] || "#999";
    size.append(bar, " " + w.spec.size);
    tr.append(color, size, cell(w.spec.message), cell(w.metadata.resourceVersion));
    const actions = document.createElement("td");
    const del = document.createElement("button");
    del.className = "delete";
    del.textContent = "Delete";
    del.onclick = () => remove(w);
    actions.append(del);
    tr.append(actions);
    return tr;
  }));
  $("empty").hidden = widgets.size > 0;
  $("rv").textContent = resourceVersion ? "at resourceVersion " + resourceVersion : "";
  $("events").textContent = events;
  $("lists").textContent = lists;
}

class Gone extends Error {}

// list replaces the local copy with a fresh list and returns its
// resourceVersion.
async function list() {
  const resp = await fetch(API + "/widgets");
  if (!resp.ok) throw new Error("list: HTTP " + resp.status);
  const body = await resp.json();
  lists++;
  widgets.clear();
  for (const w of body.items) widgets.set(key(w), w);
  resourceVersion = body.metadata.resourceVersion;
  render();
}

// watch applies the events of one watch request until the server ends it.
async function watch() {
  const url = API + "/widgets?watch=1&allowWatchBookmarks=true&resourceVersion=" +
    encodeURIComponent(resourceVersion);
  const resp = await fetch(url);
  if (resp.status === 410) throw new Gone("watch: 410 Gone");
  if (!resp.ok) throw new Error("watch: HTTP " + resp.status);
  setState("live");
  // One JSON object per line: {"type": ..., "object": ...}.
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (line) apply(JSON.parse(line));
      }
    }
  } finally {
    reader.cancel().catch(() => {}); // closes the connection after an error
  }
}

function apply(ev) {
  const obj = ev.object;
  switch (ev.type) {
    case "ADDED":
    case "MODIFIED":
      widgets.set(key(obj), obj);
      break;
    case "DELETED":
      widgets.delete(key(obj));
      break;
    case "BOOKMARK":
      break;
    case "ERROR":
      // A Status: 410 means the resourceVersion is too old to resume from.
      if (obj.code === 410) throw new Gone(obj.message);
      throw new Error("watch: " + obj.message);
    default:
      return;
  }
  resourceVersion = obj.metadata.resourceVersion;
  if (ev.type !== "BOOKMARK") events++;
  render();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function sync() {
  let needList = true;
  for (;;) {
    try {
      if (needList) {
        setState("connecting", "listing");
        await list();
        needList = false;
      }
      await watch();
      // The server ended the watch (timeout or restart): resume.
    } catch (err) {
      if (err instanceof Gone) {
        needList = true;
        continue;
      }
      setState("error", "reconnecting");
      console.warn(err);
      await sleep(1000);
    }
  }
}

async function send(method, path, body) {
  const resp = await fetch(API + path, {
    method,
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!resp.ok) {
    const status = await resp.json().catch(() => ({}));
    throw new Error(status.message || "HTTP " + resp.status);
  }
}

async function remove(w) {
  try {
    await send("DELETE", "/namespaces/" + w.metadata.namespace + "/widgets/" + w.metadata.name);
    $("error").textContent = "";
  } catch (err) {
    $("error").textContent = err.message;
  }
}

$("create").addEventListener("submit", async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  try {
    // The list updates from the watch, not from this response.
    await send("POST", "/namespaces/default/widgets", {
      apiVersion: "example.dev/v1",
      kind: "Widget",
      metadata: { name: f.get("name") },
      spec: { size: Number(f.get("size")), color: f.get("color"), message: f.get("message") || undefined },
    });
    $("error").textContent = "";
    e.target.reset();
  } catch (err) {
    $("error").textContent = err.message;
  }
});

sync();
