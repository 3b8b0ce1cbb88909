// Arbiter's persistent Node plugin worker (plain JavaScript so it runs unbuilt, from src/).
//
//   node --max-old-space-size=<MiB> worker.mjs <plugin folder>
//
// The same protocol as worker.py, on file descriptor 3 (a socket pair with the server), never on
// stdout: each message is one line of UTF-8 JSON. Calls are answered one at a time, in order,
// each answer written before the next call starts.
//
// The return value follows Python's float() rules, so a verifier means the same in both
// runtimes: numbers; booleans (1 or 0); strings in Python's float grammar (surrounding
// whitespace, `_` between digits, exponents; "nan"/"inf" parse but are not finite); bigints;
// objects whose valueOf()/Symbol.toPrimitive gives a number (JavaScript's __float__), except
// Dates. An object with `reward` supplies the reward plus optional success, message, output; one
// with `success` and no `reward` (VerifierResult-like) gives 1 or 0. null, undefined, arrays,
// NaN, ±Infinity and anything else are a bad return, never a 0.
import net from 'node:net'
import { pathToFileURL } from 'node:url'

const PROTOCOL_FD = 3

class BadReturn extends Error {}

const FINITE = /^[+-]?(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d(?:_?\d)*)?$/
const SPECIAL = /^([+-]?)(inf|infinity|nan)$/i

function describe (value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (typeof value === 'object') return value.constructor?.name ?? 'object'
  return typeof value
}

/** Python's float() for JavaScript values. */
export function pyFloat (value) {
  switch (typeof value) {
    case 'number': return value
    case 'boolean': return value ? 1 : 0
    case 'bigint': return Number(value)
    case 'string': {
      const text = value.trim()
      if (FINITE.test(text)) return Number(text.replaceAll('_', ''))
      const special = SPECIAL.exec(text)
      if (special !== null) return special[2].toLowerCase() === 'nan' ? NaN : (special[1] === '-' ? -Infinity : Infinity)
      throw new BadReturn(`could not convert string to float: ${JSON.stringify(value.length > 80 ? value.slice(0, 80) + '…' : value)}`)
    }
    case 'object':
      if (value !== null && !Array.isArray(value) && !(value instanceof Date)) {
        let primitive
        if (typeof value[Symbol.toPrimitive] === 'function') primitive = value[Symbol.toPrimitive]('number')
        else if (typeof value.valueOf === 'function' && value.valueOf !== Object.prototype.valueOf) primitive = value.valueOf()
        if (typeof primitive === 'number' || typeof primitive === 'bigint') return Number(primitive)
      }
  }
  throw new BadReturn(`float() argument must be a string or a real number, not '${describe(value)}'`)
}

function toFloat (value, what) {
  let number
  try {
    number = pyFloat(value)
  } catch (error) {
    if (error instanceof BadReturn) throw new BadReturn(`${what} is not something float() accepts: ${error.message}`)
    throw error
  }
  if (!Number.isFinite(number)) throw new BadReturn(`${what} is not a finite number (${number})`)
  return number
}

function toSuccess (value) {
  if (value === undefined || value === null) return undefined
  if (typeof value === 'boolean') return value
  throw new BadReturn(`success must be a boolean, got ${describe(value)}`)
}

function toText (value) {
  if (value === undefined || value === null) return undefined
  return typeof value === 'string' ? value : (typeof value === 'object' ? JSON.stringify(value) : String(value))
}

export function convert (value) {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && ('reward' in value || 'success' in value)) {
    const reply = {}
    const success = toSuccess(value.success)
    if (value.reward !== undefined) reply.reward = toFloat(value.reward, "the returned object's reward")
    else if ('reward' in value) throw new BadReturn("the returned object's reward is undefined")
    else if (success !== undefined) reply.reward = success ? 1 : 0
    else throw new BadReturn('the returned object has neither reward nor success')
    if (success !== undefined) reply.success = success
    for (const key of ['message', 'output']) {
      const text = toText(value[key])
      if (text !== undefined) reply[key] = text
    }
    return reply
  }
  return { reward: toFloat(value, 'the return value') }
}

function errorName (error) {
  return error instanceof Error ? error.name : describe(error)
}

function errorMessage (error) {
  if (error instanceof Error) return error.message || error.name
  try { return typeof error === 'string' ? error : JSON.stringify(error) ?? String(error) } catch { return String(error) }
}

function errorTrace (error) {
  return (error instanceof Error && typeof error.stack === 'string' ? error.stack : String(error)).slice(-8000)
}

const modules = new Map()

/**
 * The answer to one call. It is returned directly when the module is imported already and the
 * callable returns a value; a promise only when there is something to wait for (the first
 * import, an async callable), so a cheap verifier costs no turns of the event loop.
 */
function call (request) {
  const module = modules.get(request.file)
  if (module === undefined) return importThenCall(request)
  return callIn(module, request)
}

async function importThenCall (request) {
  try {
    modules.set(request.file, await import(pathToFileURL(request.file).href))
  } catch (error) {
    return { id: request.id, ok: false, code: 'ARB_PLUGIN_IMPORT_FAILED', type: errorName(error), message: `importing ${request.module} raised ${errorName(error)}: ${errorMessage(error)}`, traceback: errorTrace(error) }
  }
  return await callIn(modules.get(request.file), request)
}

function callIn (module, request) {
  const id = request.id
  let fn = module[request.callable]
  if (fn === undefined && module.default !== null && typeof module.default === 'object') fn = module.default[request.callable]
  if (fn === undefined) return { id, ok: false, code: 'ARB_PLUGIN_CALLABLE_NOT_FOUND', message: `module ${request.module} has no export ${JSON.stringify(request.callable)}` }
  if (typeof fn !== 'function') return { id, ok: false, code: 'ARB_PLUGIN_NOT_CALLABLE', message: `${request.module}.${request.callable} is a ${describe(fn)}, not a function` }
  let value
  let then
  try {
    value = fn(request.task, request.trajectory)
    then = value !== null && (typeof value === 'object' || typeof value === 'function') ? value.then : undefined
  } catch (error) {
    return raised(id, error)
  }
  // The then read above is the one used, as `await` would read it once.
  return typeof then === 'function' ? settle(id, new Promise((resolve, reject) => { then.call(value, resolve, reject) })) : answer(id, value)
}

/** The answer once a callable's promise (or thenable) settles. */
async function settle (id, pending) {
  let value
  try {
    value = await pending
  } catch (error) {
    return raised(id, error)
  }
  return answer(id, value)
}

function raised (id, error) {
  return { id, ok: false, code: 'ARB_PLUGIN_RAISED', type: errorName(error), message: errorMessage(error), traceback: errorTrace(error) }
}

function answer (id, value) {
  try {
    const reply = convert(value)
    reply.id = id
    reply.ok = true
    return reply
  } catch (error) {
    if (error instanceof BadReturn) return { id, ok: false, code: 'ARB_PLUGIN_BAD_RETURN', message: error.message }
    return { id, ok: false, code: 'ARB_PLUGIN_BAD_RETURN', type: errorName(error), message: `reading the return value raised ${errorName(error)}: ${errorMessage(error)}`, traceback: errorTrace(error) }
  }
}

/**
 * The answer when a plugin throws where `call` cannot describe it (an exported getter, an error
 * whose message getter throws): the call fails as raised, and the worker goes on serving.
 */
function unreadable (id, error) {
  let text
  try { text = String(error) } catch { text = 'an error that cannot be shown' }
  return { id, ok: false, code: 'ARB_PLUGIN_RAISED', message: `the plugin threw something unreadable: ${text}` }
}

function main () {
  const socket = new net.Socket({ fd: PROTOCOL_FD, readable: true, writable: true })
  const send = (message) => { socket.write(JSON.stringify(message) + '\n') }
  // A plugin's stray rejection or thrown callback must not take down the call that happens to
  // run next: report it on stderr (captured and logged by the server) and carry on.
  process.on('unhandledRejection', (error) => { process.stderr.write(`arbiter worker: unhandled rejection: ${errorTrace(error)}\n`) })
  process.on('uncaughtException', (error) => { process.stderr.write(`arbiter worker: uncaught exception: ${errorTrace(error)}\n`) })

  let buffer = Buffer.alloc(0)
  const queue = []
  let running = false
  const pump = async () => {
    if (running) return
    running = true
    try {
      while (queue.length > 0) {
        const request = queue.shift()
        let reply
        try {
          reply = call(request)
          if (reply instanceof Promise) reply = await reply
        } catch (error) {
          reply = unreadable(request.id, error)
        }
        send(reply)
      }
    } finally {
      running = false
    }
  }
  socket.on('data', (chunk) => {
    const seen = buffer.length // holds no newline: the search starts after it
    buffer = seen === 0 ? chunk : Buffer.concat([buffer, chunk])
    let start = 0
    let end = buffer.indexOf(0x0a, seen)
    while (end !== -1) {
      queue.push(JSON.parse(buffer.toString('utf8', start, end)))
      start = end + 1
      end = buffer.indexOf(0x0a, start)
    }
    buffer = start === buffer.length ? Buffer.alloc(0) : buffer.subarray(start)
    void pump()
  })
  // The server closed its end (it exited or recycled this worker): go.
  socket.on('end', () => process.exit(0))
  socket.on('error', () => process.exit(0))
  send({ hello: { pid: process.pid, runtime: 'node', version: process.versions.node } })
}

main()
