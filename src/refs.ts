// The form of a verifier `ref` for each kind, checked before any handler runs so that a
// malformed ref is a 400 naming the field rather than a 502 from deep inside a kind.
import type { VerifierKind } from '../schemas/verify.js'

const IDENTIFIER = '[A-Za-z_$][A-Za-z0-9_$]*'
const PLUGIN_REF = new RegExp(`^(${IDENTIFIER}(?:\\.${IDENTIFIER})*):(${IDENTIFIER})$`)
const RUBRIC_REF = /^([A-Za-z0-9][A-Za-z0-9._-]*)\/([A-Za-z0-9][A-Za-z0-9._-]*)(?:@([1-9][0-9]*))?$/

export interface PluginRef { module: string, callable: string }
export interface RubricRef { owner: string, name: string, version?: number }

export function parsePluginRef (ref: string): PluginRef | undefined {
  const match = PLUGIN_REF.exec(ref)
  return match === null ? undefined : { module: match[1], callable: match[2] }
}

export function parseRubricRef (ref: string): RubricRef | undefined {
  const match = RUBRIC_REF.exec(ref)
  if (match === null) return undefined
  const parsed: RubricRef = { owner: match[1], name: match[2] }
  if (match[3] !== undefined) parsed.version = Number(match[3])
  return parsed
}

export function parseEndpointRef (ref: string): URL | undefined {
  if (!URL.canParse(ref)) return undefined
  const url = new URL(ref)
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined
  if (url.username !== '' || url.password !== '') return undefined
  return url
}

const FORMS: Record<VerifierKind, { parse: (ref: string) => unknown, form: string }> = {
  endpoint: { parse: parseEndpointRef, form: 'an http(s) URL without credentials, e.g. http://127.0.0.1:9000/score' },
  plugin: { parse: parsePluginRef, form: 'module:callable with a dotted module path and a plain identifier, e.g. verify:score_arithmetic' },
  rubric: { parse: parseRubricRef, form: 'owner/name or owner/name@N, e.g. alice/arithmetic-correctness@2' }
}

// A training run sends the same few refs thousands of times: remember the good ones.
const MAX_REMEMBERED_REFS = 10_000
const knownGood = new Set<string>()

/** Why `ref` is not a valid ref for `kind`, or undefined when it is. */
export function refProblem (kind: VerifierKind, ref: string): string | undefined {
  const key = `${kind} ${ref}`
  if (knownGood.has(key)) return undefined
  const { parse, form } = FORMS[kind]
  if (parse(ref) === undefined) return `manifest.verifier.ref must be ${form} for kind "${kind}"`
  if (knownGood.size >= MAX_REMEMBERED_REFS) knownGood.clear()
  knownGood.add(key)
  return undefined
}
