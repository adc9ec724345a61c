"""The mystmd plugin and the Quarto extension that ``export --format values`` writes
beside the values (kept here as text so that they ship inside the Python package).
Both read ``symformer-values.json`` and evaluate nothing in it."""

#: ``symformer.mjs``: the mystmd / Jupyter Book 2 role ``{symformer}`name` ``.
MYST_PLUGIN = r"""
// mystmd / Jupyter Book 2 plugin: the `symformer` role.
// {symformer}`layer1.head1.weights[1,3]` -> the certified value of symformer-values.json
// (beside this file, written by `symformer export --format values`);
// {symformer}`worked:layer1.head1.Q[1,0]` -> that worked line (math).
// In myst.yml: project: plugins: [symformer.mjs].  An unknown name fails the build.
import { readFileSync } from 'node:fs';

const data = JSON.parse(readFileSync(new URL('./symformer-values.json', import.meta.url), 'utf8'));

const symformerRole = {
  name: 'symformer',
  doc: 'A certified value of `symformer export --format values`.',
  body: { type: String, required: true },
  run(role) {
    const key = String(role.body).replace(/\s+/g, '');
    if (key.startsWith('worked:')) {
      const line = data.worked[key.slice('worked:'.length)];
      if (line !== undefined) return [{ type: 'inlineMath', value: line }];
    } else if (Object.prototype.hasOwnProperty.call(data.values, key)) {
      return [{ type: 'text', value: data.values[key].replace('-', '\u2212') }];
    }
    throw new Error(`symformer: no value named ${key} in symformer-values.json`);
  },
};

export default { name: 'symformer values', roles: [symformerRole] };
""".lstrip("\n")

#: ``_extensions/symformer/_extension.yml``: the Quarto extension's manifest.
QUARTO_EXTENSION = """
title: symformer
author: symformer
version: 1.0.0
quarto-required: ">=1.3.0"
contributes:
  shortcodes:
    - symformer.lua
""".lstrip("\n")

#: ``_extensions/symformer/symformer.lua``: the shortcode ``{{< symformer name >}}``.
QUARTO_SHORTCODE = r"""
-- Quarto shortcode: {{< symformer layer1.head1.weights[1,3] >}} is the certified value
-- of symformer-values.json (in the project's folder, else the document's; written by
-- `symformer export --format values`); {{< symformer worked:layer1.head1.Q[1,0] >}}
-- is that worked line (math).  An unknown name stops the render with its name.
local data = nil

local function read_values()
  if data ~= nil then
    return data
  end
  local folders = {}
  if quarto.project and quarto.project.directory then
    table.insert(folders, quarto.project.directory)
  end
  if quarto.doc and quarto.doc.input_file then
    table.insert(folders, pandoc.path.directory(quarto.doc.input_file))
  end
  table.insert(folders, ".")
  for _, folder in ipairs(folders) do
    local file = io.open(pandoc.path.join({folder, "symformer-values.json"}), "r")
    if file then
      local text = file:read("a")
      file:close()
      data = quarto.json.decode(text)
      return data
    end
  end
  error("symformer: symformer-values.json not found (run symformer export --format values)")
end

return {
  ["symformer"] = function(args)
    local values = read_values()
    local key = string.gsub(pandoc.utils.stringify(args[1] or ""), "%s", "")
    if string.sub(key, 1, 7) == "worked:" then
      local line = values.worked[string.sub(key, 8)]
      if line ~= nil then
        return pandoc.Math("InlineMath", line)
      end
    elseif values.values[key] ~= nil then
      return pandoc.Str((string.gsub(values.values[key], "^%-", "\u{2212}")))
    end
    error("symformer: no value named " .. key .. " in symformer-values.json")
  end
}
""".lstrip("\n")
