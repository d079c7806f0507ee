-- +goose Up
-- Issue 14 in SQLite's terms (see ../00006_events_tenants.sql): Events,
-- leader leases for fenced client writes, and the built-in tenant types.
CREATE TABLE events (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id           INTEGER NOT NULL,
    resource_uid          TEXT    NOT NULL DEFAULT '',
    resource_name         TEXT    NOT NULL DEFAULT '',
    resource_type_name    TEXT    NOT NULL DEFAULT '',
    resource_type_version TEXT    NOT NULL DEFAULT '',
    type                  TEXT    NOT NULL CHECK (type IN ('Normal', 'Warning')),
    reason                TEXT    NOT NULL,
    message               TEXT    NOT NULL,
    source                TEXT    NOT NULL DEFAULT '',
    count                 INTEGER NOT NULL DEFAULT 1,
    first_time            INTEGER NOT NULL,
    last_time             INTEGER NOT NULL
);
CREATE INDEX events_resource_idx ON events (resource_id, id DESC);
CREATE INDEX events_last_time_idx ON events (last_time);

CREATE TABLE leader_leases (
    name             TEXT    PRIMARY KEY,
    epoch            INTEGER NOT NULL DEFAULT 0,
    holder           TEXT    NOT NULL DEFAULT '',
    lease_expires_at INTEGER,
    updated_at       INTEGER NOT NULL DEFAULT 0
);

-- The built-in tenant types, each with the next revision, and negative ids
-- (see ../00006_events_tenants.sql); AUTOINCREMENT's counter is kept at or
-- above 0 so that users' types start at 1.
UPDATE revision_counter SET value = value + 1 WHERE id = 1;
INSERT OR IGNORE INTO resource_types (id, name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy)
    SELECT -1, 'TenantRegistry', 'v1', 'Built in: an external datasource whose active rows become Tenants (registry-sync).', '{"type":"object","required":["source","valueMappings"],"additionalProperties":false,"properties":{"source":{"type":"object","description":"The external datasource whose rows are the tenants: a table or a read-only query on MySQL/MariaDB or PostgreSQL.","required":["type","host","database"],"additionalProperties":false,"oneOf":[{"required":["table"]},{"required":["query"]}],"properties":{"type":{"type":"string","enum":["mysql","postgres"]},"host":{"type":"string","minLength":1,"maxLength":253},"port":{"type":"integer","minimum":1,"maximum":65535,"description":"Default 3306 for mysql, 5432 for postgres."},"database":{"type":"string","minLength":1,"maxLength":128},"table":{"type":"string","minLength":1,"maxLength":128,"pattern":"^[A-Za-z_][A-Za-z0-9_$]*(\\.[A-Za-z_][A-Za-z0-9_$]*)?$"},"query":{"type":"string","minLength":1,"maxLength":16384},"username":{"type":"string","maxLength":128},"usernameRef":{"$ref":"#/$defs/secretRef"},"passwordRef":{"$ref":"#/$defs/secretRef"}}},"syncInterval":{"type":"string","pattern":"^\\d+(s|m|h)$","default":"1m"},"valueMappings":{"type":"object","description":"Which column holds each required value.","required":["uid","hostOrUrl","activate"],"additionalProperties":false,"properties":{"uid":{"type":"string","minLength":1,"maxLength":128},"hostOrUrl":{"type":"string","minLength":1,"maxLength":128},"activate":{"type":"string","minLength":1,"maxLength":128}}},"extraValueMappings":{"type":"object","description":"Template variable name to column.","default":{},"maxProperties":64,"propertyNames":{"pattern":"^[A-Za-z_][A-Za-z0-9_]{0,62}$"},"additionalProperties":{"type":"string","minLength":1,"maxLength":128}}},"$defs":{"secretRef":{"type":"object","description":"A secret reference: {\"env\": \"NAME\"} or {\"file\": \"/path\"}, resolved by registry-sync under its configured prefix.","minProperties":1,"maxProperties":1,"additionalProperties":false,"properties":{"env":{"type":"string","minLength":1,"maxLength":256},"file":{"type":"string","minLength":1,"maxLength":4096}}}}}', value,
        CAST(unixepoch('subsec') * 1000000 AS INTEGER), CAST(unixepoch('subsec') * 1000000 AS INTEGER), '{"resync_seconds":86400}' FROM revision_counter WHERE id = 1;
UPDATE revision_counter SET value = value + 1 WHERE id = 1;
INSERT OR IGNORE INTO resource_types (id, name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy)
    SELECT -2, 'TenantTemplate', 'v1', 'Built in: the resources made for every active row of a TenantRegistry.', '{"type":"object","required":["registryId","resources"],"additionalProperties":false,"properties":{"registryId":{"type":"string","pattern":"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$","maxLength":63,"description":"The TenantRegistry (in the same namespace) whose rows this template is rendered for."},"resources":{"type":"array","maxItems":64,"items":{"$ref":"#/$defs/resource"},"description":"The resources made for every tenant row, rendered with Go text/template + sprig."}},"$defs":{"resource":{"type":"object","required":["id","typeName","typeVersion","nameTemplate","spec"],"additionalProperties":false,"properties":{"id":{"type":"string","pattern":"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$","maxLength":63},"typeName":{"type":"string","pattern":"^[A-Z][A-Za-z0-9]{0,62}$"},"typeVersion":{"type":"string","pattern":"^v[0-9]+((alpha|beta)[0-9]+)?$"},"nameTemplate":{"type":"string","minLength":1,"maxLength":1024},"labelsTemplate":{"type":"object","default":{},"additionalProperties":{"type":"string","maxLength":1024}},"annotationsTemplate":{"type":"object","default":{},"additionalProperties":{"type":"string","maxLength":16384}},"spec":{"type":"object"},"dependIds":{"type":"array","default":[],"maxItems":64,"items":{"type":"string","minLength":1,"maxLength":63}},"creationPolicy":{"type":"string","enum":["Once","WhenNeeded"],"default":"WhenNeeded"},"deletionPolicy":{"type":"string","enum":["Delete","Retain"],"default":"Delete"},"conflictPolicy":{"type":"string","enum":["Stuck","Force"],"default":"Stuck"},"patchStrategy":{"type":"string","enum":["apply","merge","replace"],"default":"apply"},"waitForReady":{"type":"boolean","default":true},"timeoutSeconds":{"type":"integer","minimum":1,"maximum":3600,"default":300}}}}}', value,
        CAST(unixepoch('subsec') * 1000000 AS INTEGER), CAST(unixepoch('subsec') * 1000000 AS INTEGER), '{"resync_seconds":86400}' FROM revision_counter WHERE id = 1;
UPDATE revision_counter SET value = value + 1 WHERE id = 1;
INSERT OR IGNORE INTO resource_types (id, name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy)
    SELECT -3, 'Tenant', 'v1', 'Built in: one row of a registry rendered with one template; written by registry-sync only.', '{"type":"object","required":["registryId","templateRef","uid","values","resources"],"additionalProperties":false,"properties":{"registryId":{"type":"string","pattern":"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$","maxLength":63},"templateRef":{"type":"string","pattern":"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$","maxLength":63},"uid":{"type":"string","minLength":1,"maxLength":1024,"description":"The raw uid of the row."},"values":{"type":"object","description":"The template variables of the row: uid, hostOrUrl, host, activate, registryId, templateRef and the extra mappings.","additionalProperties":{"type":"string"}},"resources":{"type":"array","maxItems":64,"items":{"$ref":"#/$defs/resource"},"description":"The resources of the template, as it had them when the Tenant was written."}},"$defs":{"resource":{"type":"object","required":["id","typeName","typeVersion","nameTemplate","spec"],"additionalProperties":false,"properties":{"id":{"type":"string","pattern":"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$","maxLength":63},"typeName":{"type":"string","pattern":"^[A-Z][A-Za-z0-9]{0,62}$"},"typeVersion":{"type":"string","pattern":"^v[0-9]+((alpha|beta)[0-9]+)?$"},"nameTemplate":{"type":"string","minLength":1,"maxLength":1024},"labelsTemplate":{"type":"object","default":{},"additionalProperties":{"type":"string","maxLength":1024}},"annotationsTemplate":{"type":"object","default":{},"additionalProperties":{"type":"string","maxLength":16384}},"spec":{"type":"object"},"dependIds":{"type":"array","default":[],"maxItems":64,"items":{"type":"string","minLength":1,"maxLength":63}},"creationPolicy":{"type":"string","enum":["Once","WhenNeeded"],"default":"WhenNeeded"},"deletionPolicy":{"type":"string","enum":["Delete","Retain"],"default":"Delete"},"conflictPolicy":{"type":"string","enum":["Stuck","Force"],"default":"Stuck"},"patchStrategy":{"type":"string","enum":["apply","merge","replace"],"default":"apply"},"waitForReady":{"type":"boolean","default":true},"timeoutSeconds":{"type":"integer","minimum":1,"maximum":3600,"default":300}}}}}', value,
        CAST(unixepoch('subsec') * 1000000 AS INTEGER), CAST(unixepoch('subsec') * 1000000 AS INTEGER), NULL FROM revision_counter WHERE id = 1;
UPDATE sqlite_sequence SET seq = max(seq, 0) WHERE name = 'resource_types';
INSERT INTO sqlite_sequence (name, seq) SELECT 'resource_types', 0
    WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'resource_types');

-- +goose Down
DELETE FROM resource_types WHERE name IN ('TenantRegistry', 'TenantTemplate', 'Tenant') AND version = 'v1'
    AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.resource_type_id = resource_types.id);
DROP TABLE leader_leases;
DROP TABLE events;
