// Building DOM nodes without ever parsing markup: strings become text nodes
// (textContent), so trace text from users and files is always inert.

type Child = Node | string | number | null | undefined | false;

export interface Props {
  class?: string;
  id?: string;
  title?: string;
  /** Attributes set with setAttribute (aria-*, role, data-*, for, type...). */
  attrs?: Record<string, string>;
  style?: Partial<Record<'width' | 'background' | 'backgroundColor' | 'borderLeftColor' | 'left' | 'color', string>>;
}

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.class) node.className = props.class;
  if (props.id) node.id = props.id;
  if (props.title) node.title = props.title;
  for (const [k, v] of Object.entries(props.attrs ?? {})) {
    // Event-handler attributes are never set from here.
    if (/^on/i.test(k)) throw new Error(`el: refusing event attribute ${k}`);
    node.setAttribute(k, v);
  }
  for (const [k, v] of Object.entries(props.style ?? {})) {
    if (v !== undefined) (node.style as unknown as Record<string, string>)[k] = v;
  }
  append(node, ...children);
  return node;
}

export function append(node: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces all children (text stays text). */
export function replace(node: Node, ...children: Child[]): void {
  while (node.firstChild) node.removeChild(node.firstChild);
  append(node, ...children);
}

export function $(id: string): HTMLElement {
  const node = document.getElementById(id);
  if (!node) throw new Error(`missing element #${id}`);
  return node;
}

export function input(id: string): HTMLInputElement {
  return $(id) as HTMLInputElement;
}

export function select(id: string): HTMLSelectElement {
  return $(id) as HTMLSelectElement;
}

export function button(id: string): HTMLButtonElement {
  return $(id) as HTMLButtonElement;
}

export function textarea(id: string): HTMLTextAreaElement {
  return $(id) as HTMLTextAreaElement;
}

/** Lets the browser paint (status text, progress) before a long synchronous call. */
export function nextFrame(): Promise<void> {
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

export function fmt(x: number | null | undefined, digits = 3): string {
  if (x === null || x === undefined) return '–';
  if (Number.isNaN(x)) return 'NaN';
  return x.toFixed(digits);
}

/**
 * Numbers the page's sections 1, 2, 3… in the order they are shown (the step
 * rewards appear only after a first scoring): each h2 keeps its title in
 * data-title and gets "k. title" as text.
 */
export function numberSections(): void {
  let k = 0;
  for (const h of document.querySelectorAll<HTMLElement>('main > section > h2')) {
    const title = h.dataset.title ?? (h.textContent ?? '').replace(/^\d+\.\s*/, '');
    h.dataset.title = title;
    if ((h.parentElement as HTMLElement).hidden) continue;
    h.textContent = `${++k}. ${title}`;
  }
}
