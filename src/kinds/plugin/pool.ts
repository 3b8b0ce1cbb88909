// Worker processes for one plugin and one runtime: lazily started, pipelined, recycled after N
// calls, reaped when idle, killed as a whole process group on timeout and on close.
//
// Dispatch (#pick): a cheap verifier's call is packed onto a busy worker while the expected wait
// there is short (PACK_SERVICE_MS, PIPELINE_BUDGET_MS); else it goes to an idle worker; else to a
// new worker while the pool is under its size; else it is pipelined onto the least busy worker
// (up to MAX_PIPELINE calls each); else it waits in the pool's queue. A worker answers its calls
// one at a time, in order, each answer written before the next call starts; so when a worker
// dies, its oldest unanswered call is the one that was running (it fails: crashed, or timed out)
// and the calls behind it never started: they go back to the pool and run on another worker.
import { spawn, type ChildProcess } from 'node:child_process'
import type { Socket } from 'node:net'
import { VerificationError, type ErrorCode, type VerifierIdentity } from '../../errors.js'
import type { Log } from '../../registry.js'
import type { RawVerdict } from '../../result.js'
import { cut } from '../../snippet.js'

export const MAX_PIPELINE = 64
/**
 * A verifier answering within PACK_SERVICE_MS on average costs less than waking another worker
 * process for it: its calls are packed onto a busy worker whose calls in flight are all of such
 * verifiers, while that worker is expected to reach them within PIPELINE_BUDGET_MS (the time its
 * current call has run plus the averages of all its calls). One pipelined process then reads and
 * answers them in batches; measured on 2 cores, a trivial plugin at 50 connections: ~20% more
 * req/s than spread over two workers. Nothing packs behind a call of a slow or not yet timed
 * verifier, nor behind one running longer than the budget.
 */
const PACK_SERVICE_MS = 0.25
const PIPELINE_BUDGET_MS = 2
/** Refs whose service time a pool keeps; past that the oldest goes. */
const MAX_TIMED_REFS = 1024
/** Plugin stdout/stderr kept per worker between two log lines; the rest is counted, not kept. */
export const OUTPUT_CAP_BYTES = 64 * 1024
const OUTPUT_FLUSH_MS = 200
/** The longest exception message a client is sent; the log keeps the traceback. */
const MESSAGE_CAP_CHARS = 2000
const STDERR_TAIL_CHARS = 2000
const EXIT_DRAIN_MS = 500

/** Codes a worker may answer with; anything else from it is a protocol violation. */
const WORKER_CODES = new Set<ErrorCode>([
  'ARB_PLUGIN_MODULE_NOT_FOUND', 'ARB_PLUGIN_IMPORT_FAILED', 'ARB_PLUGIN_CALLABLE_NOT_FOUND',
  'ARB_PLUGIN_NOT_CALLABLE', 'ARB_PLUGIN_RAISED', 'ARB_PLUGIN_BAD_RETURN', 'ARB_PLUGIN_CRASHED'
])

export interface SpawnSpec {
  command: string
  args: string[]
  cwd: string
  env: Record<string, string>
}

export interface PoolOptions {
  /** For messages and logs: the plugin's name and runtime. */
  label: string
  spawn: SpawnSpec
  size: number
  maxCalls: number
  log: Log
  /** Worker starts, crashes and timeouts, for /metrics. */
  onEvent?: (event: 'start' | 'crash' | 'timeout') => void
  /** Runs once a worker process exists (its scheduling policy is set here). */
  onSpawn?: (pid: number) => void
  /** Runs before each worker starts (the digest re-check); a thrown VerificationError-ish fails its calls. */
  beforeStart?: () => Promise<{ code: ErrorCode, message: string } | undefined>
  /** Tests: PACK_SERVICE_MS and PIPELINE_BUDGET_MS. */
  packServiceMs?: number
  pipelineBudgetMs?: number
}

export interface CallRequest {
  identity: VerifierIdentity
  module: string
  file: string
  callable: string
  task: unknown
  trajectory: unknown
  timeoutMs: number
  requestId?: string
}

interface Call {
  id: number
  /** The call as one protocol line. */
  line: string
  request: CallRequest
  resolve: (verdict: RawVerdict) => void
  reject: (error: Error) => void
  timer?: NodeJS.Timeout
  worker?: WorkerProcess
  /** Settled (answered, failed or timed out); an answer arriving later is dropped. */
  done: boolean
  sentAt: number
  /** Its verifier's average service time when that is known and cheap (see PACK_SERVICE_MS). */
  expectedMs?: number
  /** Workers that died before they were ready while holding this call (it never started). */
  startFailures: number
}

/** A call whose worker died before it was ready this many times fails: the runtime cannot start. */
const MAX_START_FAILURES = 2

let nextCallId = 1

// Every live worker's pid, so that the server exiting without close() still takes them along.
const livePids = new Set<number>()
let exitHookInstalled = false
function killGroup (pid: number | undefined): void {
  if (pid === undefined) return
  try {
    process.kill(-pid, 'SIGKILL')
  } catch {
    // ESRCH: the group is already gone.
  }
}
function installExitHook (): void {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.on('exit', () => { for (const pid of livePids) killGroup(pid) })
}

/** A protocol message is one line of JSON: JSON text never holds a raw newline. */
function encode (id: number, request: CallRequest): string {
  return JSON.stringify({
    id, module: request.module, file: request.file, callable: request.callable, task: request.task, trajectory: request.trajectory
  }) + '\n'
}

const NEWLINE = 0x0a
const NOTHING = Buffer.alloc(0)

class OutputCapture {
  chunks: Buffer[] = []
  bytes = 0
  dropped = 0
  add (chunk: Buffer): void {
    const room = OUTPUT_CAP_BYTES - this.bytes
    if (room <= 0) { this.dropped += chunk.length; return }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk
    this.chunks.push(kept)
    this.bytes += kept.length
    this.dropped += chunk.length - kept.length
  }

  take (): { text: string, dropped: number } | undefined {
    if (this.bytes === 0 && this.dropped === 0) return undefined
    const out = { text: Buffer.concat(this.chunks).toString('utf8'), dropped: this.dropped }
    this.chunks = []
    this.bytes = 0
    this.dropped = 0
    return out
  }
}

export class WorkerProcess {
  readonly pool: PluginPool
  child?: ChildProcess
  pid?: number
  readonly inflight: Call[] = []
  /** Of the calls in flight: the expected time of the cheap ones, and how many are not known cheap. */
  expectedMs = 0
  uncertainCalls = 0
  calls = 0
  ready = false
  dead = false
  /** Why the server killed it, when it did. */
  killedFor?: 'timeout' | 'recycle' | 'idle' | 'close' | 'cancelled'
  lastUsed = Date.now()
  #lastAnswerAt = 0
  exitCode: number | null = null
  signal: NodeJS.Signals | null = null
  #pending: string[] = []
  #flushScheduled = false
  #socket?: Socket
  /** The start of a line not yet complete. */
  #incoming: Buffer = NOTHING
  #stdout = new OutputCapture()
  #stderr = new OutputCapture()
  #stderrTail = ''
  #outputTimer?: NodeJS.Timeout
  #exited = false
  #socketClosed = false
  #finalized = false
  #startError?: { code: ErrorCode, message: string }
  /** The worker said it is going (out of memory) after answering: none of the rest started. */
  #fatal = false

  constructor (pool: PluginPool) {
    this.pool = pool
  }

  start (spec: SpawnSpec): void {
    installExitHook()
    let child: ChildProcess
    try {
      child = spawn(spec.command, spec.args, {
        cwd: spec.cwd,
        env: spec.env,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
        detached: true
      })
      this.pool.onEvent('start')
    } catch (error) {
      this.failStart('ARB_PLUGIN_RUNTIME_UNAVAILABLE', `cannot start ${spec.command}: ${(error as Error).message}`)
      return
    }
    this.child = child
    this.pid = child.pid
    if (this.pid !== undefined) {
      livePids.add(this.pid)
      this.pool.onSpawn(this.pid)
    }
    child.unref()
    const socket = child.stdio[3] as Socket
    this.#socket = socket
    socket.unref()
    socket.on('data', (chunk: Buffer) => this.#onData(chunk))
    socket.on('error', () => {})
    socket.on('close', () => { this.#socketClosed = true; this.#maybeFinalize() })
    for (const [stream, capture] of [[child.stdout, this.#stdout], [child.stderr, this.#stderr]] as const) {
      if (stream === null) continue
      ;(stream as unknown as Socket).unref?.()
      stream.on('data', (chunk: Buffer) => {
        capture.add(chunk)
        // Only the tail is kept: decode no more of a chatty plugin's chunk than can stay.
        if (capture === this.#stderr) this.#stderrTail = (this.#stderrTail + chunk.subarray(-STDERR_TAIL_CHARS).toString('utf8')).slice(-STDERR_TAIL_CHARS)
        this.#scheduleOutputFlush()
      })
    }
    child.on('error', (error) => {
      // spawn failed (ENOENT, EACCES): no process, no exit event to wait for.
      if (this.pid === undefined) {
        this.failStart('ARB_PLUGIN_RUNTIME_UNAVAILABLE', `cannot start ${spec.command}: ${error.message}`)
      }
    })
    child.on('exit', (code, signal) => {
      this.exitCode = code
      this.signal = signal
      this.#exited = true
      // Take any grandchildren the plugin left behind along with it.
      killGroup(this.pid)
      this.dead = true
      this.pool.detach(this)
      if (this.#socketClosed) this.#maybeFinalize()
      else setTimeout(() => { this.#socketClosed = true; this.#maybeFinalize() }, EXIT_DRAIN_MS).unref()
    })
    if (this.#pending.length > 0) this.#flush()
  }

  failStart (code: ErrorCode, message: string): void {
    this.#startError = { code, message }
    this.dead = true
    this.pool.detach(this)
    this.#withoutProcess()
  }

  /** There is no process to wait for: its calls are settled now. */
  #withoutProcess (): void {
    this.#exited = true
    this.#socketClosed = true
    this.#maybeFinalize()
  }

  send (call: Call): void {
    call.worker = this
    call.sentAt = performance.now()
    this.inflight.push(call)
    if (call.expectedMs === undefined) this.uncertainCalls++
    else this.expectedMs += call.expectedMs
    this.calls += 1
    this.lastUsed = Date.now()
    // Recycled after maxCalls: no new calls; it is stopped once these are answered.
    if (this.calls >= this.pool.maxCalls) this.pool.detach(this)
    this.#pending.push(call.line)
    if (!this.#flushScheduled) {
      this.#flushScheduled = true
      setImmediate(() => this.#flush())
    }
  }

  /** When the worker began `call`, its oldest: once it was sent and the one before was answered. */
  runningSince (call: Call): number {
    return Math.max(call.sentAt, this.#lastAnswerAt)
  }

  #flush (): void {
    this.#flushScheduled = false
    if (this.#socket === undefined || this.dead || this.#pending.length === 0) return
    const data = this.#pending.length === 1 ? this.#pending[0] : this.#pending.join('')
    this.#pending = []
    this.#socket.write(data)
  }

  #onData (chunk: Buffer): void {
    if (this.dead && this.killedFor !== undefined) return
    const seen = this.#incoming.length // holds no newline: the search starts after it
    const buffer = seen === 0 ? chunk : Buffer.concat([this.#incoming, chunk])
    let start = 0
    let end = buffer.indexOf(NEWLINE, seen)
    while (end !== -1) {
      let message: Record<string, unknown>
      try {
        message = JSON.parse(buffer.toString('utf8', start, end))
        if (message === null || typeof message !== 'object') throw new TypeError('not a message')
      } catch {
        this.pool.log.error({ plugin: this.pool.label, pid: this.pid }, 'plugin worker sent an unreadable line; killing it')
        this.kill('cancelled')
        return
      }
      start = end + 1
      this.#onMessage(message)
      if (this.dead && this.killedFor !== undefined) return
      end = buffer.indexOf(NEWLINE, start)
    }
    this.#incoming = start === buffer.length ? NOTHING : buffer.subarray(start)
  }

  #onMessage (message: Record<string, unknown>): void {
    if (message.hello !== undefined) {
      this.ready = true
      return
    }
    const call = this.inflight[0]
    if (call === undefined || message.id !== call.id) {
      this.pool.log.error({ plugin: this.pool.label, pid: this.pid, id: message.id }, 'plugin worker answered out of order; killing it')
      this.kill('cancelled')
      return
    }
    this.inflight.shift()
    if (call.expectedMs === undefined) this.uncertainCalls--
    else this.expectedMs = this.inflight.length === 0 ? 0 : this.expectedMs - call.expectedMs // no float drift
    this.lastUsed = Date.now()
    const now = performance.now()
    // Service time: from when the worker could start this call to its answer.
    if (message.ok === true) this.pool.observe(call, now - this.runningSince(call))
    this.#lastAnswerAt = now
    if (!call.done) this.pool.settle(call, message)
    if (message.fatal === true) {
      // It exits by itself; the exit handler re-dispatches the calls behind this one.
      this.#fatal = true
      this.pool.detach(this)
      return
    }
    const next = this.inflight[0]
    if (next !== undefined && next.done) {
      // The next call already timed out while queued behind this one: it would now run for
      // nobody, possibly forever. Replace the worker; the calls behind it are re-dispatched.
      this.kill('cancelled')
      return
    }
    if (this.killedFor === undefined && (this.calls >= this.pool.maxCalls || this.pool.retired) && this.inflight.length === 0) {
      this.kill('recycle')
      return
    }
    this.pool.drain()
  }

  #scheduleOutputFlush (): void {
    if (this.#outputTimer !== undefined) return
    this.#outputTimer = setTimeout(() => { this.#outputTimer = undefined; this.flushOutput() }, OUTPUT_FLUSH_MS)
    this.#outputTimer.unref()
  }

  flushOutput (): void {
    for (const [stream, capture] of [['stdout', this.#stdout], ['stderr', this.#stderr]] as const) {
      const taken = capture.take()
      if (taken !== undefined) this.pool.log.debug({ plugin: this.pool.label, pid: this.pid, stream, output: taken.text, droppedBytes: taken.dropped }, 'plugin output')
    }
  }

  /** Kills the worker's whole process group. Its calls are settled by the exit handler. */
  kill (reason: NonNullable<WorkerProcess['killedFor']>): void {
    if (this.killedFor === undefined) this.killedFor = reason
    this.dead = true
    this.pool.detach(this)
    if (this.pid !== undefined) killGroup(this.pid)
    else if (this.child === undefined && this.#startError === undefined) {
      // Never spawned (its digest re-check was still running): there is no process to wait for.
      // Its calls are settled as any stopped worker's are: shutting down on close; on a timeout
      // the late call has failed already and the ones behind it go to another worker.
      this.#withoutProcess()
    }
  }

  #maybeFinalize (): void {
    if (this.#finalized || !this.#exited || !this.#socketClosed) return
    this.#finalized = true
    if (this.pid !== undefined) livePids.delete(this.pid)
    this.pool.all.delete(this)
    if (this.#outputTimer !== undefined) clearTimeout(this.#outputTimer)
    this.flushOutput()
    const calls = this.inflight.splice(0)
    if (this.#startError !== undefined) {
      for (const call of calls) this.pool.fail(call, this.#startError.code, this.#startError.message)
      return
    }
    const how = this.signal !== null ? `was killed by ${this.signal}` : `exited with code ${this.exitCode}`
    // Died by itself before saying hello: none of its calls started (a worker reads calls only
    // after its hello). They get another worker, unless this keeps happening to them: then the
    // runtime cannot start (bad interpreter, a cap too small to boot) and they fail saying so.
    // Killed by the server (a deadline passed, shutdown) is handled below.
    if (!this.ready && this.killedFor === undefined) {
      const tail = this.#stderrTail.trim().split('\n').slice(-1)[0] ?? ''
      this.pool.log.error({ plugin: this.pool.label, pid: this.pid, exitCode: this.exitCode, signal: this.signal, stderr: this.#stderrTail }, 'plugin worker died before it was ready')
      const retry: Call[] = []
      for (const call of calls) {
        call.startFailures += 1
        if (call.startFailures < MAX_START_FAILURES) retry.push(call)
        // Killed by a signal (the OOM killer, an operator) says nothing about the runtime: the
        // same call may well succeed later. Exiting by itself, twice, means it cannot start.
        else this.pool.fail(call, this.signal !== null ? 'ARB_PLUGIN_CRASHED' : 'ARB_PLUGIN_RUNTIME_UNAVAILABLE', `the ${this.pool.label} worker ${how} before it was ready, ${call.startFailures} times${tail === '' ? '' : `: ${tail.slice(0, 300)}`}`)
      }
      this.pool.requeue(retry)
      return
    }
    if (this.#fatal) {
      this.pool.requeue(calls)
      return
    }
    if (this.killedFor === 'close') {
      for (const call of calls) this.pool.fail(call, 'ARB_SHUTTING_DOWN', 'the plugin workers are shutting down')
      return
    }
    const [head, ...rest] = calls
    if (head !== undefined && !head.done) {
      this.pool.log.warn({ plugin: this.pool.label, pid: this.pid, exitCode: this.exitCode, signal: this.signal, stderr: this.#stderrTail, requestId: head.request.requestId }, 'plugin worker died during a call')
      this.pool.onEvent('crash')
      this.pool.fail(head, 'ARB_PLUGIN_CRASHED', `the ${this.pool.label} worker (pid ${this.pid}) ${how} during the call; it is replaced`)
    }
    this.pool.requeue(rest)
  }
}

export class PluginPool {
  readonly label: string
  readonly log: Log
  readonly onEvent: (event: 'start' | 'crash' | 'timeout') => void
  readonly onSpawn: (pid: number) => void
  readonly maxCalls: number
  readonly #options: PoolOptions
  /** Workers that take new calls. */
  readonly workers: WorkerProcess[] = []
  /** Every worker not yet finalized, including those being retired. */
  readonly all = new Set<WorkerProcess>()
  readonly #queue: Call[] = []
  #closed = false
  /** Replaced by a reload: workers finish their calls, then stop. */
  retired = false
  /** Per verifier (ref): a moving average of one call's service time, in ms. */
  readonly #serviceMs = new Map<string, number>()
  readonly #packServiceMs: number
  readonly #pipelineBudgetMs: number

  constructor (options: PoolOptions) {
    this.#options = options
    this.label = options.label
    this.log = options.log
    this.onEvent = options.onEvent ?? (() => {})
    this.onSpawn = options.onSpawn ?? (() => {})
    this.maxCalls = options.maxCalls
    this.#packServiceMs = options.packServiceMs ?? PACK_SERVICE_MS
    this.#pipelineBudgetMs = options.pipelineBudgetMs ?? PIPELINE_BUDGET_MS
  }

  get queued (): number { return this.#queue.length }

  observe (call: Call, ms: number): void {
    const ref = call.request.identity.ref
    const average = this.#serviceMs.get(ref)
    // Refs come from clients: the map stays bounded (only answered calls are timed).
    if (average === undefined && this.#serviceMs.size >= MAX_TIMED_REFS) this.#serviceMs.delete(this.#serviceMs.keys().next().value as string)
    this.#serviceMs.set(ref, average === undefined ? ms : average * 0.9 + ms * 0.1)
  }

  // Not async: the promise is the call's own, without another one wrapped around it per call.
  call (request: CallRequest): Promise<RawVerdict> {
    if (this.#closed) return Promise.reject(new VerificationError('ARB_SHUTTING_DOWN', request.identity, 'the plugin workers are shutting down'))
    return new Promise<RawVerdict>((resolve, reject) => {
      const id = nextCallId++
      const call: Call = { id, line: encode(id, request), request, resolve, reject, done: false, sentAt: 0, startFailures: 0 }
      call.timer = setTimeout(() => this.#onTimeout(call), request.timeoutMs)
      this.#dispatch(call)
    })
  }

  #dispatch (call: Call, front = false): void {
    const worker = this.#pick(call)
    if (worker !== undefined) worker.send(call)
    else if (front) this.#queue.unshift(call)
    else this.#queue.push(call)
  }

  /**
   * The worker for the next call, or undefined when every worker is full: for a cheap verifier
   * the busiest worker with room in the budget (packing, see PACK_SERVICE_MS); else an idle
   * worker; else a new one while the pool is under its size; else the least busy.
   */
  #pick (call: Call): WorkerProcess | undefined {
    const serviceMs = this.#serviceMs.get(call.request.identity.ref)
    const packs = serviceMs !== undefined && serviceMs <= this.#packServiceMs
    call.expectedMs = packs ? serviceMs : undefined
    const now = packs ? performance.now() : 0
    let packed: WorkerProcess | undefined
    let idle: WorkerProcess | undefined
    let leastBusy: WorkerProcess | undefined
    for (const worker of this.workers) {
      const ahead = worker.inflight.length
      if (ahead === 0) {
        idle ??= worker
        continue
      }
      if (leastBusy === undefined || ahead < leastBusy.inflight.length) leastBusy = worker
      if (!packs || !worker.ready || worker.uncertainCalls > 0 || ahead >= MAX_PIPELINE || (packed !== undefined && ahead <= packed.inflight.length)) continue
      const wait = now - worker.runningSince(worker.inflight[0]) + worker.expectedMs
      if (wait < this.#pipelineBudgetMs) packed = worker
    }
    if (packed !== undefined) return packed
    if (idle !== undefined) return idle
    if (this.workers.length < this.#options.size) return this.#startWorker()
    return leastBusy !== undefined && leastBusy.inflight.length < MAX_PIPELINE ? leastBusy : undefined
  }

  #startWorker (): WorkerProcess {
    const worker = new WorkerProcess(this)
    this.workers.push(worker)
    this.all.add(worker)
    const before = this.#options.beforeStart
    if (before === undefined) {
      worker.start(this.#options.spawn)
    } else {
      before().then((problem) => {
        if (worker.dead) return
        if (problem !== undefined) worker.failStart(problem.code, problem.message)
        else worker.start(this.#options.spawn)
      }, (error: Error) => { worker.failStart('ARB_PLUGIN_NOT_VETTED', `cannot re-check the plugin's digest: ${error.message}`) })
        // start() settles its own failures; should it throw anyway, the calls fail, not the process.
        .catch((error: Error) => { worker.failStart('ARB_PLUGIN_RUNTIME_UNAVAILABLE', `cannot start the worker: ${error.message}`) })
    }
    return worker
  }

  /** Takes a worker out of rotation (it is dying or retiring). */
  detach (worker: WorkerProcess): void {
    const index = this.workers.indexOf(worker)
    if (index !== -1) this.workers.splice(index, 1)
  }

  /** Runs queued calls on workers that have room. */
  drain (): void {
    while (this.#queue.length > 0) {
      const before = this.#queue.length
      const call = this.#queue.shift() as Call
      if (call.done) continue
      this.#dispatch(call, true)
      if (this.#queue.length === before) break // it went back to the queue: no room anywhere
    }
  }

  /** Calls that never started on a dead worker: run them elsewhere, ahead of newer calls. */
  requeue (calls: Call[]): void {
    for (let i = calls.length - 1; i >= 0; i--) {
      const call = calls[i]
      if (call.done) continue
      call.worker = undefined
      if (this.#closed) this.fail(call, 'ARB_SHUTTING_DOWN', 'the plugin workers are shutting down')
      else this.#queue.unshift(call)
    }
    if (!this.#closed) this.drain()
  }

  settle (call: Call, message: Record<string, unknown>): void {
    if (message.ok === true) {
      const reward = message.reward
      if (typeof reward !== 'number' || !Number.isFinite(reward)) {
        this.fail(call, 'ARB_PLUGIN_BAD_RETURN', 'the worker answered without a finite reward')
        return
      }
      const verdict: RawVerdict = { reward }
      if (typeof message.success === 'boolean') verdict.success = message.success
      if (typeof message.message === 'string') verdict.message = message.message
      if (typeof message.output === 'string') verdict.output = message.output
      this.#finish(call)
      call.resolve(verdict)
      return
    }
    const code = typeof message.code === 'string' && WORKER_CODES.has(message.code as ErrorCode) ? message.code as ErrorCode : 'ARB_VERIFIER_FAILED'
    const said = typeof message.message === 'string' ? message.message : 'the plugin worker reported a failure without a message'
    const text = cut(said, MESSAGE_CAP_CHARS)
    const logged = { plugin: this.label, code, requestId: call.request.requestId, ref: call.request.identity.ref, type: message.type, traceback: message.traceback }
    if (code === 'ARB_PLUGIN_RAISED' || code === 'ARB_PLUGIN_BAD_RETURN') this.log.debug(logged, 'plugin verifier failed')
    else this.log.warn(logged, 'plugin verifier failed')
    const details = typeof message.type === 'string' ? { exception: message.type } : undefined
    this.fail(call, code, text, details)
  }

  fail (call: Call, code: ErrorCode, message: string, details?: Record<string, unknown>): void {
    if (call.done) return
    this.#finish(call)
    call.reject(new VerificationError(code, call.request.identity, message, details === undefined ? {} : { details }))
  }

  #finish (call: Call): void {
    call.done = true
    if (call.timer !== undefined) clearTimeout(call.timer)
  }

  #onTimeout (call: Call): void {
    if (call.done) return
    const seconds = call.request.timeoutMs / 1000
    const worker = call.worker
    if (worker === undefined) {
      const index = this.#queue.indexOf(call)
      if (index !== -1) this.#queue.splice(index, 1)
      this.fail(call, 'ARB_PLUGIN_TIMEOUT', `the ${this.label} verifier did not start within ${seconds} s: all its workers were busy`)
      return
    }
    if (worker.inflight[0] === call) {
      this.onEvent('timeout')
      this.fail(call, 'ARB_PLUGIN_TIMEOUT', worker.ready
        ? `the ${this.label} verifier did not return within ${seconds} s; its worker (pid ${worker.pid}) was killed and is replaced`
        : `the ${this.label} worker did not start within ${seconds} s; it was killed and is replaced`)
      this.log.warn({ plugin: this.label, pid: worker.pid, requestId: call.request.requestId, ref: call.request.identity.ref, timeoutS: seconds }, 'plugin verifier timed out; killing its worker')
      worker.kill('timeout')
      return
    }
    // Still waiting behind another call on that worker: fail it now; the worker skips it later.
    this.fail(call, 'ARB_PLUGIN_TIMEOUT', `the ${this.label} verifier did not start within ${seconds} s: its worker was busy`)
  }

  /** After a reload: no worker outlives the calls it already has. */
  retire (): void {
    this.retired = true
    this.reap(0)
  }

  /** Stops workers idle for longer than idleMs. */
  reap (idleMs: number, now = Date.now()): void {
    for (const worker of [...this.workers]) {
      if (worker.inflight.length === 0 && now - worker.lastUsed >= idleMs) worker.kill('idle')
    }
  }

  /** Kills every worker (whole process groups) and fails whatever is pending. */
  async close (): Promise<void> {
    this.#closed = true
    for (const call of this.#queue.splice(0)) this.fail(call, 'ARB_SHUTTING_DOWN', 'the plugin workers are shutting down')
    const workers = [...this.all]
    await Promise.all(workers.map(async (worker) => await new Promise<void>((resolve) => {
      if (worker.child === undefined || worker.child.exitCode !== null || worker.child.signalCode !== null) {
        worker.kill('close')
        resolve()
        return
      }
      // Workers are unref'd so an idle one never holds the server open; waiting for one to go must.
      worker.child.ref()
      worker.child.once('exit', () => resolve())
      worker.kill('close')
    })))
    this.all.clear()
  }
}
