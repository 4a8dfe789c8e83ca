-- Schedules: a tenant's standing orders to start a workflow. The schedule itself is one JSON
-- document; the columns beside it are what control planes claim and page on.
CREATE TABLE schedules (
    namespace  TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    doc        TEXT   NOT NULL,
    due_at     BIGINT,
    revision   BIGINT NOT NULL,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;
