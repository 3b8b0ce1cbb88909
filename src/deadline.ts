// The deadline of one verification, shared by everything it waits on: a queue slot, a socket,
// the sleep before a retry. It is itself the stop signal they wait on: it stops when the
// deadline passes (or when the work is stopped early); `fits` tells whether a wait would end
// before it.
// Not an AbortController: creating one and adding and removing its listeners was about 7 µs of
// a judged verification's CPU on Node 20 (an EventTarget per verification); this is a flag, a
// reason, a short list of callbacks and one timer.

/** What a wait needs of a stop signal: an AbortSignal has this shape too (tests pass one). */
export interface StopSignal {
  readonly aborted: boolean
  readonly reason: unknown
  throwIfAborted: () => void
  /** `listener` runs once, when the signal stops; never if it has already stopped. */
  addEventListener: (type: 'abort', listener: () => void) => void
  removeEventListener: (type: 'abort', listener: () => void) => void
}

export class Deadline implements StopSignal {
  /** When it passes, in Date.now() milliseconds. */
  readonly at: number
  readonly #timer: NodeJS.Timeout
  #aborted = false
  #reason: unknown
  #listeners: Array<() => void> = []

  constructor (ms: number, what: string) {
    this.at = Date.now() + ms
    this.#timer = setTimeout(() => { this.stop(new DOMException(`the ${what} deadline passed`, 'TimeoutError')) }, ms)
    this.#timer.unref()
  }

  get aborted (): boolean { return this.#aborted }
  get reason (): unknown { return this.#reason }

  /** True once it passed, not when the work was stopped early. */
  get passed (): boolean { return this.#aborted && this.#reason instanceof DOMException }

  throwIfAborted (): void {
    if (this.#aborted) throw this.#reason
  }

  addEventListener (_type: 'abort', listener: () => void): void {
    if (!this.#aborted) this.#listeners.push(listener)
  }

  removeEventListener (_type: 'abort', listener: () => void): void {
    const index = this.#listeners.indexOf(listener)
    if (index !== -1) this.#listeners.splice(index, 1)
  }

  /** Whether a wait of `ms` would end before the deadline. */
  fits (ms: number): boolean { return Date.now() + ms < this.at }

  /** Waits `ms`; rejects with the reason when the deadline passes (or the work is stopped) first. */
  async sleep (ms: number): Promise<void> {
    this.throwIfAborted()
    await new Promise<void>((resolve, reject) => {
      const onStop = (): void => {
        clearTimeout(timer)
        reject(this.#reason)
      }
      const timer = setTimeout(() => {
        this.removeEventListener('abort', onStop)
        resolve()
      }, ms)
      this.addEventListener('abort', onStop)
    })
  }

  /** The work is over: the timer goes. */
  clear (): void { clearTimeout(this.#timer) }

  /** Stops everything waiting on it now, with `reason` (the first reason stays). */
  stop (reason: unknown): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason
    clearTimeout(this.#timer)
    const listeners = this.#listeners
    this.#listeners = []
    for (const listener of listeners) {
      try {
        listener()
      } catch (error) {
        // As an EventTarget does: a throwing listener neither stops the others nor is swallowed.
        queueMicrotask(() => { throw error })
      }
    }
  }
}
