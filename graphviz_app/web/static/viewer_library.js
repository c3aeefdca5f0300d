// Appended to the viewer's bundle (which defines GraphvizAppViewer in this module): make it the page's,
// once. This element's message never changes, so the page sends the 1.5 MB bundle once per visit, not
// with every graph (graphviz_app.viewer's component carries only the graph).
window.GraphvizAppViewer = GraphvizAppViewer;
window.dispatchEvent(new Event("graphviz-app-viewer-loaded"));

export default function () {}
