// Runs the script of a prof-report HTML flame graph in node against a small
// stand-in for the DOM, drives it (click, search, hover) and prints what it
// drew as JSON, so that pytest can check the page without a browser.
// usage: node flame_dom.js FILE.html
"use strict";
const fs = require("fs");
const html = fs.readFileSync(process.argv[2], "utf8");
const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
const data = scripts.find((m) => m[1].includes('id="prof-data"'))[2];
const code = scripts.find((m) => !m[1].includes("application/json"))[2];

function element(id) {
  const el = {
    id, children: [], style: {}, dataset: {}, handlers: {}, value: "", parent: null,
    _text: "", _classes: new Set(), offsetWidth: 100,
    get className() { return [...this._classes].join(" "); },
    set className(v) { this._classes = new Set(String(v).split(/\s+/).filter(Boolean)); },
    classList: null,
    get textContent() { return this._text; },
    set textContent(v) { this._text = String(v); if (v === "") this.children = []; },
    appendChild(c) { c.parent = this; this.children.push(c); return c; },
    addEventListener(type, fn) { (this.handlers[type] = this.handlers[type] || []).push(fn); },
    closest(sel) {
      for (let e = this; e; e = e.parent) if (sel === ".frame" && e._classes.has("frame")) return e;
      return null;
    },
  };
  el.classList = {
    toggle: (c, on) => { if (on) el._classes.add(c); else el._classes.delete(c); },
    contains: (c) => el._classes.has(c),
  };
  return el;
}
const byId = {};
for (const id of ["chart", "tip", "search", "status", "reset", "title"]) byId[id] = element(id);
byId["prof-data"] = element("prof-data");
byId["prof-data"].textContent = data;
const docHandlers = {};
global.document = {
  getElementById: (id) => byId[id] || null,
  createElement: () => element(null),
  addEventListener: (t, fn) => { docHandlers[t] = fn; },
};
global.window = { innerWidth: 1200 };
new Function(code)();

const chart = byId.chart;
const frames = () => chart.children.map((el) => ({
  name: el.textContent, left: parseFloat(el.style.left), width: parseFloat(el.style.width),
  top: parseFloat(el.style.top), cls: el.className,
}));
const fire = (el, type, ev) => (el.handlers[type] || []).forEach((fn) => fn(ev));
const find = (name) => chart.children.find((el) => el.textContent === name);
const out = { initial: frames() };
const target = process.argv[3];
if (target && find(target)) {
  fire(chart, "mousemove", { target: find(target), clientX: 10, clientY: 10 });
  out.tip = byId.tip.textContent;
  fire(chart, "click", { target: find(target) });
  out.zoomed = frames();
  byId.search.value = process.argv[4] || "";
  fire(byId.search, "input", {});
  out.searched = frames();
  out.status = byId.status.textContent;
  fire(byId.reset, "click", {});
  out.reset = frames();
}
console.log(JSON.stringify(out));
