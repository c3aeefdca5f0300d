// The program editor: a plain textarea that reports its text while the person
// types (debounced), so the page can show parse errors before Run is pressed.
// Ctrl+Enter (Cmd+Enter) asks the page to run the program. `data.label` and `data.testid` name a
// second editor (a program compared with the first) apart from the first.
const DEBOUNCE_MS = 250;

export default function (component) {
  const { parentElement, data, setStateValue, setTriggerValue } = component;
  const area = parentElement.querySelector("textarea");
  if (!area || area.dataset.ready) {
    return;
  }
  area.dataset.ready = "1";
  area.value = (data && data.value) || "";
  const label = parentElement.querySelector(".gv-editor-label");
  if (data && typeof data.label === "string" && label) {
    label.textContent = data.label;  // text, never markup
    area.setAttribute("aria-label", data.label);
  }
  if (data && typeof data.testid === "string") area.dataset.testid = data.testid;
  // A new text starts at its beginning: caret and scroll home, not where the last one ended.
  area.setSelectionRange(0, 0);
  area.scrollTop = 0;
  area.scrollLeft = 0;
  const fit = () => {
    area.rows = Math.min(30, Math.max(5, area.value.split("\n").length + 1));
  };
  fit();
  let timer = null;
  const send = () => {
    clearTimeout(timer);
    timer = null;
    setStateValue("value", area.value);
  };
  area.addEventListener("input", () => {
    fit();
    clearTimeout(timer);
    timer = setTimeout(send, DEBOUNCE_MS);
  });
  area.addEventListener("blur", () => {
    if (timer !== null) send();
  });
  area.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send();
      setTriggerValue("run", true);
    }
  });
}
