// Upstream text (an error page, a judge's answer) cut for a message a person reads. No imports:
// the rollout client (src/client.ts) uses it too and carries no server code.

/** `text` cut to `max` characters with an ellipsis, line breaks kept. */
export function cut (text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text
}

/** `text` on one line, cut to `max` characters with an ellipsis. */
export function snippet (text: string, max = 200): string {
  return cut(text.replace(/\s+/g, ' ').trim(), max)
}
