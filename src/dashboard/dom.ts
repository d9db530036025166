// DOM building for the dashboard's page modules: every server string goes in as text (a Text
// node or an attribute value), never as HTML.

export type Child = Node | string | null | undefined | false;
export type Attrs = Record<string, string | boolean | ((e: Event) => void)>;

export function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else if (v !== false) el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

export function time(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** A link only for an http(s) URL (the API accepts nothing else; a page never links javascript:). */
export function safeHref(url: string): string | null {
  try {
    const u = new URL(url);
    return u.protocol === "https:" || u.protocol === "http:" ? u.href : null;
  } catch {
    return null;
  }
}

/** The page modules' stylesheet, linked once beside style.css (index.html stays as it is). */
export function ensureStylesheet(href = "/dashboard/plan-page.css"): void {
  if (typeof document === "undefined" || document.querySelector(`link[href="${href}"]`)) return;
  document.head.append(h("link", { rel: "stylesheet", href }));
}
