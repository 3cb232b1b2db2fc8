// Kafka Connect's standalone offsets file, as FileOffsetBackingStore reads and writes it: a
// HashMap<byte[], byte[]> through ObjectInputStream/ObjectOutputStream. Used by
// test_stores_offsets.py to check Samsa's file against the JVM's own serialization.
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public class OffsetsFile {
    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        if (args[0].equals("read")) {
            try (ObjectInputStream in = new ObjectInputStream(new FileInputStream(args[1]))) {
                Map<byte[], byte[]> map = (Map<byte[], byte[]>) in.readObject();
                List<String> lines = new ArrayList<>();
                for (Map.Entry<byte[], byte[]> e : map.entrySet()) {
                    String v = e.getValue() == null ? "null" : new String(e.getValue(), StandardCharsets.UTF_8);
                    lines.add(new String(e.getKey(), StandardCharsets.UTF_8) + "\t" + v);
                }
                Collections.sort(lines);
                for (String line : lines) System.out.println(line);
            }
        } else {
            Map<byte[], byte[]> map = new HashMap<>();
            for (int i = 2; i + 1 < args.length; i += 2)
                map.put(args[i].getBytes(StandardCharsets.UTF_8), args[i + 1].getBytes(StandardCharsets.UTF_8));
            try (ObjectOutputStream out = new ObjectOutputStream(new FileOutputStream(args[1]))) {
                out.writeObject(map);
            }
        }
    }
}
