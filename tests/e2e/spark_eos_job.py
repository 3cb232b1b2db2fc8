"""A Structured Streaming job run as its own process so tests can kill -9 its driver: reads IN with the
samsa source, writes one output record per input to OUT with the exactly-once samsa sink.

    python spark_eos_job.py BOOTSTRAP IN OUT CHECKPOINT (run|drain)

`run` processes 50 offsets per micro-batch until killed; `drain` processes everything available
(trigger availableNow) and exits."""

from __future__ import annotations

import sys

from samsa.spark import local_session


def main() -> None:
    bs, src, dst, checkpoint, mode = sys.argv[1:6]
    spark = local_session("samsa-eos-job")
    df = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bs)
          .option("subscribe", src).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "50").load()
          .selectExpr("key", "concat(cast(value as string), ':out') as value"))
    w = (df.writeStream.format("samsa").option("kafka.bootstrap.servers", bs).option("topic", dst)
         .option("checkpointLocation", checkpoint))
    if mode == "drain":
        w.trigger(availableNow=True).start().awaitTermination()
    else:
        print("started", flush=True)
        w.trigger(processingTime="0 seconds").start().awaitTermination()


if __name__ == "__main__":
    main()
