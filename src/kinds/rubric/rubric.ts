// What a rubric is once loaded, whatever file format it came from, and the TypeBox schema that
// structured (YAML/JSON) rubric files are validated against. A typo in a key is an error rather
// than a silently ignored field, so the schema is closed (`additionalProperties: false`).
import { Type, type Static } from 'typebox'
import { Compile } from 'typebox/compile'

export const MAX_SAMPLES = 16

export const JudgeOverridesSchema = Type.Object({
  model: Type.Optional(Type.String({ minLength: 1, description: 'Judge model for this rubric instead of ARBITER_JUDGE_MODEL' })),
  temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2, description: 'Sampling temperature (default 0)' })),
  samples: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_SAMPLES, description: 'Judge calls per verification, averaged per dimension (default 1)' }))
}, { additionalProperties: false })
export type JudgeOverrides = Static<typeof JudgeOverridesSchema>

export const DimensionSchema = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  weight: Type.Optional(Type.Number({ minimum: 0, description: 'Relative weight in the score (default 1)' })),
  description: Type.String({ minLength: 1 }),
  criteria: Type.Optional(Type.Array(Type.String({ minLength: 1 })))
}, { additionalProperties: false })

export const StructuredRubricSchema = Type.Object({
  $schema: Type.Optional(Type.String({ description: 'Ignored; lets editors find a schema for the file' })),
  title: Type.String({ minLength: 1 }),
  description: Type.Optional(Type.String()),
  pass_threshold: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  requires_reference: Type.Optional(Type.Boolean()),
  instructions: Type.Optional(Type.String({ description: 'Extra instructions for the judge' })),
  judge: Type.Optional(JudgeOverridesSchema),
  dimensions: Type.Array(DimensionSchema, { minItems: 1, maxItems: 64 })
}, { additionalProperties: false })
export type StructuredRubric = Static<typeof StructuredRubricSchema>

/** Front matter of a Markdown rubric: the structured fields except the dimensions. */
export const MarkdownFrontMatterSchema = Type.Object({
  title: Type.Optional(Type.String({ minLength: 1 })),
  description: Type.Optional(Type.String()),
  pass_threshold: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  requires_reference: Type.Optional(Type.Boolean()),
  instructions: Type.Optional(Type.String()),
  judge: Type.Optional(JudgeOverridesSchema)
}, { additionalProperties: false })

export const structuredValidator = Compile(StructuredRubricSchema)
export const frontMatterValidator = Compile(MarkdownFrontMatterSchema)

export interface Criterion {
  /** Stable id the judge uses to mark it unmet: C1, C2, … across the whole rubric. */
  id: string
  text: string
}

export interface Dimension {
  name: string
  weight: number
  description: string
  criteria: Criterion[]
}

export interface Rubric {
  owner: string
  name: string
  version: number
  /** owner/name@version */
  ref: string
  format: 'yaml' | 'json' | 'markdown'
  /** sha256:<hex> of the file's bytes. */
  contentHash: string
  path: string
  title: string
  description: string
  passThreshold: number
  requiresReference: boolean
  instructions: string
  judge: JudgeOverrides
  dimensions: Dimension[]
  /** The Markdown text of a Markdown rubric, shown to the judge as written. */
  text?: string
}

/** Numbers the criteria C1… in rubric order so the judge can name them exactly. */
export function numberCriteria (dimensions: Array<{ name: string, weight?: number, description: string, criteria?: string[] }>): Dimension[] {
  let next = 1
  return dimensions.map((dimension) => ({
    name: dimension.name,
    weight: dimension.weight ?? 1,
    description: dimension.description,
    criteria: (dimension.criteria ?? []).map((text) => ({ id: `C${next++}`, text }))
  }))
}

/** Problems TypeBox cannot express: duplicate names, all weights zero. */
export function dimensionProblems (dimensions: Dimension[]): string | undefined {
  const seen = new Set<string>()
  for (const dimension of dimensions) {
    if (seen.has(dimension.name)) return `dimension "${dimension.name}" appears twice`
    seen.add(dimension.name)
  }
  if (dimensions.every((dimension) => dimension.weight === 0)) return 'at least one dimension needs a weight above 0'
  // Weights that add up past the largest number would make every score 0 or NaN.
  if (!Number.isFinite(dimensions.reduce((sum, dimension) => sum + dimension.weight, 0))) return 'the dimension weights add up to more than a number can hold'
  return undefined
}
