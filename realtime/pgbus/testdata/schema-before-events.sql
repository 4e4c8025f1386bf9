-- The schema of m0serve 0.1.0 before frames carried an event type: TestUpgrade
-- makes it, and an instance of today must take it over.
SELECT pg_advisory_xact_lock(hashtext('m0serve schema'));
CREATE SCHEMA IF NOT EXISTS m0;
CREATE SEQUENCE IF NOT EXISTS m0.frame_seq;
CREATE TABLE IF NOT EXISTS m0.meta (epoch bigint NOT NULL);
INSERT INTO m0.meta (epoch)
	SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
	WHERE NOT EXISTS (SELECT 1 FROM m0.meta);
CREATE TABLE IF NOT EXISTS m0.frames (
	seq     bigint PRIMARY KEY,
	channel text NOT NULL,
	data    bytea NOT NULL,
	origin  text NOT NULL DEFAULT '',
	at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS frames_at ON m0.frames (at);
CREATE OR REPLACE FUNCTION m0.put(p_seq bigint, p_channel text, p_data bytea, p_origin text DEFAULT '')
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, m0 AS $$
BEGIN
	IF p_channel = '' OR ascii(p_channel) < 32 OR ascii(p_channel) = 127 OR octet_length(p_channel) > 1024 THEN
		RAISE EXCEPTION 'm0: the channel name % is refused (empty, reserved or over 1024 bytes)', quote_literal(p_channel);
	END IF;
	IF octet_length(p_data) > 65536 THEN
		RAISE EXCEPTION 'm0: a frame of % bytes is over the 65536 a channel takes', octet_length(p_data);
	END IF;
	INSERT INTO m0.frames (seq, channel, data, origin) VALUES (p_seq, p_channel, p_data, p_origin);
	PERFORM pg_notify('m0_frames', p_seq::text);
	RETURN p_seq;
END $$;
CREATE OR REPLACE FUNCTION m0.publish(p_channel text, p_data bytea)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, m0
AS $$ SELECT m0.put(nextval('m0.frame_seq'), p_channel, p_data) $$;
CREATE OR REPLACE FUNCTION m0.publish(p_channel text, p_data text)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, m0
AS $$ SELECT m0.put(nextval('m0.frame_seq'), p_channel, convert_to(p_data, 'UTF8')) $$;
GRANT USAGE ON SCHEMA m0 TO PUBLIC;
