-- Tags and search attributes as rows as well, so a list filtered on one is served by an index
-- newest first (SQLite cannot index the elements of a JSON column): a rare tag is found without
-- scanning every run. The JSON columns stay the source the runs are read from.
CREATE TABLE run_tags (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    namespace  TEXT,
    tag        TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, tag)
);
CREATE INDEX run_tags_ns_created ON run_tags (tag, namespace, created_at DESC, run_id DESC);
CREATE INDEX run_tags_created ON run_tags (tag, created_at DESC, run_id DESC);
INSERT INTO run_tags (run_id, namespace, tag, created_at)
    SELECT r.id, r.namespace, t.value, r.created_at FROM runs r, json_each(r.tags) t
    WHERE t.type = 'text'
    ON CONFLICT DO NOTHING;

-- `value` is the attribute's JSON text (`"eu-west"`, `2`, `true`), as the engine writes it.
CREATE TABLE run_attributes (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    namespace  TEXT,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX run_attributes_ns_created ON run_attributes (key, value, namespace, created_at DESC, run_id DESC);
CREATE INDEX run_attributes_created ON run_attributes (key, value, created_at DESC, run_id DESC);
INSERT INTO run_attributes (run_id, namespace, key, value, created_at)
    SELECT r.id, r.namespace, a.key,
        CASE a.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE json_quote(a.value) END,
        r.created_at
    FROM runs r, json_each(r.search_attributes) a
    WHERE true
    ON CONFLICT DO NOTHING;
