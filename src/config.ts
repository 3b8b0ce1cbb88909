// The one config parser. Every setting is an environment variable listed in SETTINGS with its
// parser, default and one line of documentation; the README's configuration table is checked
// against this list. `loadConfig` is pure (it takes the environment as an argument) so tests
// and `src/server.ts` share it; only server.ts passes `process.env`.
import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { ConfigError } from './errors.js'

const PROJECT_ROOT = fileURLToPath(new URL(import.meta.url.includes('/dist/') ? '../../' : '../', import.meta.url))

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = typeof LOG_LEVELS[number]

export interface Config {
  host: string
  port: number
  logLevel: LogLevel
  bodyLimit: number
  maxDepth: number
  maxTimeoutS: number

  endpointAllow: string[]
  endpointMaxBytes: number
  endpointConnections: number
  endpointRetries: number

  pluginsDir: string
  pluginsLock: string | undefined
  python: string | undefined
  pluginWorkers: number
  pluginMemoryMb: number
  pluginIdleS: number
  pluginMaxCalls: number

  rubricsDir: string
  judgeBaseUrl: string | undefined
  judgeApiKey: string | undefined
  judgeModel: string | undefined
  judgeTimeoutS: number
  judgeConcurrency: number
  judgeResponseFormat: 'json_schema' | 'json_object'
  judgeMaxChars: number
  judgeCacheSize: number
  judgeCacheTtlS: number

  apiTokens: string[]
  apiTokensFile: string | undefined
  metricsAuth: boolean
  maxInFlight: number
  maxQueue: number
  maxEventLoopDelayMs: number
  batchMaxItems: number
  batchConcurrency: number
  graceS: number
}

interface Setting<K extends keyof Config> {
  env: string
  parse: (raw: string, env: string) => Config[K]
  default: Config[K]
  doc: string
}

// Parsers. Each throws a ConfigError naming the variable, so a bad value stops the process at
// start instead of surfacing as a strange behaviour hours into a training run.
function text (raw: string): string { return raw }

function optionalText (raw: string): string | undefined { return raw === '' ? undefined : raw }

function integer (min: number, max = Number.MAX_SAFE_INTEGER) {
  return (raw: string, env: string): number => {
    if (!/^[0-9]+$/.test(raw.trim())) throw new ConfigError(env, `must be a whole number, got "${raw}"`)
    const value = Number(raw)
    if (value < min || value > max) throw new ConfigError(env, `must be between ${min} and ${max}, got ${value}`)
    return value
  }
}

function seconds (raw: string, env: string): number {
  const value = Number(raw)
  if (raw.trim() === '' || !Number.isFinite(value) || value <= 0) throw new ConfigError(env, `must be a positive number of seconds, got "${raw}"`)
  return value
}

const BYTE_UNITS: Record<string, number> = { '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }

function bytes (raw: string, env: string): number {
  const match = /^\s*([0-9]+)\s*([a-z]*)\s*$/i.exec(raw)
  const unit = match === null ? undefined : BYTE_UNITS[match[2].toLowerCase()]
  if (match === null || unit === undefined || Number(match[1]) === 0) {
    throw new ConfigError(env, `must be a positive size such as 16777216, 16MiB or 512KiB, got "${raw}"`)
  }
  return Number(match[1]) * unit
}

function list (raw: string): string[] {
  return raw.split(',').map((item) => item.trim()).filter((item) => item !== '')
}

function oneOf<T extends string> (choices: readonly T[]) {
  return (raw: string, env: string): T => {
    if (!(choices as readonly string[]).includes(raw)) throw new ConfigError(env, `must be one of ${choices.join('|')}, got "${raw}"`)
    return raw as T
  }
}

function httpUrl (raw: string, env: string): string | undefined {
  if (raw === '') return undefined
  if (!URL.canParse(raw) || !/^https?:$/.test(new URL(raw).protocol)) throw new ConfigError(env, `must be an http(s) URL, got "${raw}"`)
  return raw.replace(/\/+$/, '')
}

function flag (raw: string, env: string): boolean {
  if (/^(1|true|yes|on)$/i.test(raw)) return true
  if (/^(0|false|no|off)$/i.test(raw)) return false
  throw new ConfigError(env, `must be true or false, got "${raw}"`)
}

const cores = availableParallelism()

export const SETTINGS: { [K in keyof Config]: Setting<K> } = {
  host: { env: 'HOST', parse: text, default: '127.0.0.1', doc: 'Address to listen on (the container image sets 0.0.0.0).' },
  port: { env: 'PORT', parse: integer(0, 65535), default: 8080, doc: 'Port to listen on.' },
  logLevel: { env: 'LOG_LEVEL', parse: oneOf(LOG_LEVELS), default: 'info', doc: 'pino level: fatal, error, warn, info, debug, trace or silent.' },
  bodyLimit: { env: 'ARBITER_BODY_LIMIT', parse: bytes, default: 16 * 1024 ** 2, doc: 'Largest request body (bytes, or with KiB/MiB/GiB); larger is a 413.' },
  maxDepth: { env: 'ARBITER_MAX_DEPTH', parse: integer(2, 10_000), default: 256, doc: 'Deepest JSON nesting accepted in a request body; deeper is a 400.' },
  maxTimeoutS: { env: 'ARBITER_MAX_TIMEOUT_S', parse: seconds, default: 600, doc: 'Cap on any verifier deadline, including a manifest\'s verifier.timeout_s.' },

  endpointAllow: { env: 'ARBITER_ENDPOINT_ALLOW', parse: list, default: [], doc: 'Comma-separated hosts, origins or CIDRs endpoints are restricted to; empty allows any address except link-local, metadata, unspecified and multicast.' },
  endpointMaxBytes: { env: 'ARBITER_ENDPOINT_MAX_BYTES', parse: bytes, default: 1024 ** 2, doc: 'Largest endpoint answer read; larger is ARB_ENDPOINT_RESPONSE_TOO_LARGE.' },
  endpointConnections: { env: 'ARBITER_ENDPOINT_CONNECTIONS', parse: integer(1, 100_000), default: 128, doc: 'Keep-alive connections per endpoint origin.' },
  endpointRetries: { env: 'ARBITER_ENDPOINT_RETRIES', parse: integer(0, 2), default: 2, doc: 'Retries for connect errors and 429/503 with Retry-After, inside the deadline (at most 2).' },

  pluginsDir: { env: 'ARBITER_PLUGINS_DIR', parse: text, default: `${PROJECT_ROOT}examples/plugins`, doc: 'Folder of environment plugins, one sub-folder each.' },
  pluginsLock: { env: 'ARBITER_PLUGINS_LOCK', parse: optionalText, default: undefined, doc: 'Lock file pinning name@version to sha256 digests; when set, unpinned or changed plugins are refused.' },
  python: { env: 'ARBITER_PYTHON', parse: optionalText, default: undefined, doc: 'Python interpreter for Python plugins (a virtualenv\'s python); default: python3 on PATH, resolved once.' },
  pluginWorkers: { env: 'ARBITER_PLUGIN_WORKERS', parse: integer(1, 256), default: cores, doc: 'Worker processes per plugin at most (default: number of cores).' },
  pluginMemoryMb: { env: 'ARBITER_PLUGIN_MEMORY_MB', parse: integer(32, 1_048_576), default: 1024, doc: 'Memory cap per plugin worker process, in MiB.' },
  pluginIdleS: { env: 'ARBITER_PLUGIN_IDLE_S', parse: seconds, default: 300, doc: 'Idle plugin workers are stopped after this many seconds.' },
  pluginMaxCalls: { env: 'ARBITER_PLUGIN_MAX_CALLS', parse: integer(1), default: 100_000, doc: 'A plugin worker is recycled after this many calls (a fresh process bounds a slow leak).' },

  rubricsDir: { env: 'ARBITER_RUBRICS_DIR', parse: text, default: `${PROJECT_ROOT}examples/rubrics`, doc: 'Rubric store: <owner>/<name>/<version>.(yaml|yml|json|md). Reloaded on SIGHUP.' },
  judgeBaseUrl: { env: 'ARBITER_JUDGE_BASE_URL', parse: httpUrl, default: undefined, doc: 'OpenAI-compatible base URL, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1.' },
  judgeApiKey: { env: 'ARBITER_JUDGE_API_KEY', parse: optionalText, default: undefined, doc: 'Bearer key sent to the judge only; redacted in logs.' },
  judgeModel: { env: 'ARBITER_JUDGE_MODEL', parse: optionalText, default: undefined, doc: 'Judge model name.' },
  judgeTimeoutS: { env: 'ARBITER_JUDGE_TIMEOUT_S', parse: seconds, default: 120, doc: 'Deadline for one judged verification, retries included.' },
  judgeConcurrency: { env: 'ARBITER_JUDGE_CONCURRENCY', parse: integer(1, 10_000), default: 16, doc: 'Judge calls in flight at most; more are queued.' },
  judgeResponseFormat: { env: 'ARBITER_JUDGE_RESPONSE_FORMAT', parse: oneOf(['json_schema', 'json_object'] as const), default: 'json_schema', doc: 'json_schema (strict structured output) or json_object for servers without it.' },
  judgeMaxChars: { env: 'ARBITER_JUDGE_MAX_CHARS', parse: integer(1000), default: 80_000, doc: 'Flattened trajectories longer than this are cut in the middle for the judge.' },
  judgeCacheSize: { env: 'ARBITER_JUDGE_CACHE_SIZE', parse: integer(0), default: 10_000, doc: 'Judged verdicts kept in the LRU cache (0 turns it off).' },
  judgeCacheTtlS: { env: 'ARBITER_JUDGE_CACHE_TTL_S', parse: seconds, default: 3600, doc: 'How long a cached verdict is served.' },

  apiTokens: { env: 'ARBITER_API_TOKENS', parse: list, default: [], doc: 'Comma-separated bearer tokens; when set (or a file is), every /v1/ route requires one.' },
  apiTokensFile: { env: 'ARBITER_API_TOKENS_FILE', parse: optionalText, default: undefined, doc: 'File with one bearer token per line.' },
  metricsAuth: { env: 'ARBITER_METRICS_AUTH', parse: flag, default: false, doc: 'Require a bearer token for /metrics too.' },
  maxInFlight: { env: 'ARBITER_MAX_IN_FLIGHT', parse: integer(1), default: 1024, doc: 'Verifications running at once.' },
  maxQueue: { env: 'ARBITER_MAX_QUEUE', parse: integer(0), default: 4096, doc: 'Verifications waiting for a slot; beyond it a 503 with Retry-After.' },
  maxEventLoopDelayMs: { env: 'ARBITER_MAX_EVENT_LOOP_DELAY_MS', parse: integer(0), default: 1000, doc: 'Verifications are refused with 503 while the event loop lags more than this (0 turns the check off).' },
  batchMaxItems: { env: 'ARBITER_BATCH_MAX_ITEMS', parse: integer(1, 100_000), default: 1024, doc: 'Most items in one /v1/verify/batch call.' },
  batchConcurrency: { env: 'ARBITER_BATCH_CONCURRENCY', parse: integer(1, 10_000), default: 64, doc: 'Items of one batch verified at once.' },
  graceS: { env: 'ARBITER_GRACE_S', parse: seconds, default: 660, doc: 'On SIGTERM, how long work in flight may finish before exit.' }
}

export const defaultConfig: Config = Object.fromEntries(
  Object.entries(SETTINGS).map(([key, setting]) => [key, setting.default])
) as unknown as Config

/** Reads the environment into a Config, throwing a ConfigError that names the bad variable. */
export function loadConfig (env: Record<string, string | undefined>): Config {
  const config: Record<string, unknown> = { ...defaultConfig }
  const known = new Set<string>()
  for (const [key, setting] of Object.entries(SETTINGS) as Array<[keyof Config, Setting<keyof Config>]>) {
    known.add(setting.env)
    const raw = env[setting.env]
    if (raw !== undefined) config[key] = setting.parse(raw, setting.env)
  }
  for (const name of Object.keys(env)) {
    if (name.startsWith('ARBITER_') && !known.has(name) && !isServiceLink(name, env)) {
      throw new ConfigError(name, `is not an Arbiter setting (known: ${[...known].filter((n) => n.startsWith('ARBITER_')).join(', ')})`)
    }
  }
  return config as unknown as Config
}

/**
 * Kubernetes injects `<SERVICE>_SERVICE_HOST`, `<SERVICE>_PORT_80_TCP…` and `<SERVICE>_PORT` for
 * every Service in the namespace (enableServiceLinks), so a Service named `arbiter` or
 * `arbiter-metrics` would otherwise stop the pod as "unknown setting". Such a name is only
 * skipped when its `_SERVICE_HOST` sibling is there too, so a typo is still caught.
 */
function isServiceLink (name: string, env: Record<string, string | undefined>): boolean {
  const match = /^(ARBITER(?:_[A-Z0-9]+)*?)_(SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT(?:_\d+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)?)$/.exec(name)
  return match !== null && env[`${match[1]}_SERVICE_HOST`] !== undefined
}

/** A config for tests and embedding: defaults, quiet logs, plus overrides. */
export function configWith (overrides: Partial<Config> = {}): Config {
  return { ...defaultConfig, logLevel: 'silent', ...overrides }
}
