// A small LRU cache with a time to live, on a Map (insertion order is the recency order).
// Size 0 turns it off. The clock is an argument so tests can move time without waiting.

export class LruTtlCache<V> {
  readonly #max: number
  readonly #ttlMs: number
  readonly #now: () => number
  readonly #entries = new Map<string, { value: V, expires: number }>()

  constructor (options: { max: number, ttlMs: number, now?: () => number }) {
    this.#max = options.max
    this.#ttlMs = options.ttlMs
    this.#now = options.now ?? Date.now
  }

  get size (): number { return this.#entries.size }
  get enabled (): boolean { return this.#max > 0 }

  get (key: string): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    this.#entries.delete(key)
    if (entry.expires <= this.#now()) return undefined
    this.#entries.set(key, entry)
    return entry.value
  }

  set (key: string, value: V): void {
    if (this.#max <= 0) return
    this.#entries.delete(key)
    this.#entries.set(key, { value, expires: this.#now() + this.#ttlMs })
    while (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value as string
      this.#entries.delete(oldest)
    }
  }

  clear (): void { this.#entries.clear() }
}
