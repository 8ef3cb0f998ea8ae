/*
 * The chat page's one way of making an element: el(tag, props, ...children).
 *
 * props is a class name (a string) or an object: "class", "text", "on<event>" handlers, and any
 * other attribute (true sets it empty; undefined, null and false leave it out). Children are
 * nodes or text, appended as text nodes (never parsed as HTML); undefined, null and false are
 * skipped, so el("p", "note", maybeText) works whether or not there is text.
 */

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (typeof props === "string") node.className = props;
  else if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
    }
  }
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    node.append(typeof child === "object" ? child : String(child));
  }
  return node;
}
