// trainops registry browser: draws the lineage graph (cytoscape + dagre) and the training
// curve (uPlot) from the JSON a page embeds in <script type="application/json">. Every
// value is handed to the libraries as data (text labels), never as HTML.
(function () {
  "use strict";

  function embedded(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  var COLORS = { git: "#f1f1f1", image: "#e7def9", checkpoint: "#dcebff", eval: "#dcf3e2",
                 model: "#fde7cf", dataset: "#fbf3c6", rollout: "#f9dede", other: "#e8ebf0", unknown: "#ffffff" };

  function href(node) {
    if (node.kind === "git") { return "/search?q=" + encodeURIComponent(node.id.slice(4)); }
    if (!node.repository) { return null; }
    return "/artifact/" + encodeURIComponent(node.id) + "?repository=" + encodeURIComponent(node.repository);
  }

  function drawGraph(data) {
    var container = document.getElementById("graph");
    if (!container || typeof cytoscape === "undefined") { return; }
    if (typeof cytoscapeDagre !== "undefined") { cytoscape.use(cytoscapeDagre); }
    var elements = [];
    data.nodes.forEach(function (n) {
      elements.push({ data: { id: n.id, label: n.label, kind: n.kind, href: href(n),
        root: n.id === data.root ? 1 : 0, faded: (n.pruned || n.missing) ? 1 : 0 } });
    });
    data.edges.forEach(function (e, i) {
      elements.push({ data: { id: "e" + i, source: e.child, target: e.parent, label: e.relation } });
    });
    var cy = cytoscape({
      container: container,
      elements: elements,
      wheelSensitivity: 0.3,
      style: [
        { selector: "node", style: { "shape": "round-rectangle", "label": "data(label)", "text-valign": "center",
          "text-wrap": "wrap", "text-max-width": 180, "font-size": 11, "width": 190, "height": 40,
          "background-color": function (ele) { return COLORS[ele.data("kind")] || COLORS.other; },
          "border-width": 1, "border-color": "#7a8494" } },
        { selector: "node[root = 1]", style: { "border-width": 3, "border-color": "#2458c6" } },
        { selector: "node[faded = 1]", style: { "border-style": "dashed", "color": "#a14b00" } },
        { selector: "edge", style: { "curve-style": "bezier", "target-arrow-shape": "triangle", "width": 1.5,
          "line-color": "#9aa3b0", "target-arrow-color": "#9aa3b0", "label": "data(label)", "font-size": 9,
          "color": "#5b6472", "text-background-color": "#f7f8fa", "text-background-opacity": 1 } }
      ],
      layout: { name: typeof cytoscapeDagre !== "undefined" ? "dagre" : "breadthfirst", rankDir: "BT",
                nodeSep: 30, rankSep: 60 }
    });
    cy.on("tap", "node", function (evt) {
      var target = evt.target.data("href");
      if (target) { window.location.assign(target); }
    });
    container.setAttribute("data-nodes", String(cy.nodes().length));
    container.setAttribute("data-edges", String(cy.edges().length));
    window.trainopsGraph = cy;
  }

  function drawCurve(data) {
    var container = document.getElementById("curve");
    if (!container || typeof uPlot === "undefined" || !data.metric) { return; }
    var xs = data.points.map(function (p) { return p.step; });
    var ys = data.points.map(function (p) { return p.value; });
    var width = Math.max(320, Math.min(container.clientWidth || 900, 1000));
    var plot = new uPlot({
      width: width, height: 320,
      scales: { x: { time: false } },
      axes: [{ label: "step" }, { label: data.metric }],
      series: [{ label: "step" }, { label: data.metric, stroke: "#2458c6", width: 2,
                 points: { show: true, size: 7, fill: "#2458c6" } }]
    }, [xs, ys], container);
    container.setAttribute("data-points", String(xs.length));
    window.trainopsCurve = plot;
  }

  var graph = embedded("graph-data");
  if (graph) { drawGraph(graph); }
  var curve = embedded("curve-data");
  if (curve) { drawCurve(curve); }
})();
