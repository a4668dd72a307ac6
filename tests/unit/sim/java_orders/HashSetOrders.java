// Fixture generator for tests/unit/sim/test_zk_tree.py (run by make_fixture.py, not by the tests).
//
// Reads one command per line from stdin (fields separated by a tab) and applies it to one
// java.util.HashSet<String>; prints a line for each "order" and "cap" command:
//   new [capacity]   a fresh HashSet (no argument: the default constructor)
//   add NAME         HashSet.add
//   remove NAME      HashSet.remove
//   clone            replace the set by HashSet.clone()
//   order            print the iteration order, tab separated
//   cap              print the backing HashMap's table length (0 before the first add)
// Needs --add-opens java.base/java.util=ALL-UNNAMED for "cap".
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HashSet;

public class HashSetOrders {
    public static void main(String[] args) throws Exception {
        Field mapField = HashSet.class.getDeclaredField("map");
        mapField.setAccessible(true);
        Field tableField = HashMap.class.getDeclaredField("table");
        tableField.setAccessible(true);
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out =
                new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        out.println("java\t" + System.getProperty("java.version"));
        HashSet<String> set = new HashSet<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", 2);
            switch (f[0]) {
                case "new":
                    set = f.length > 1 ? new HashSet<>(Integer.parseInt(f[1])) : new HashSet<>();
                    break;
                case "add":
                    set.add(f[1]);
                    break;
                case "remove":
                    set.remove(f[1]);
                    break;
                case "clone":
                    @SuppressWarnings("unchecked")
                    HashSet<String> copy = (HashSet<String>) set.clone();
                    set = copy;
                    break;
                case "order":
                    out.println("order\t" + String.join("\t", set));
                    break;
                case "cap":
                    Object[] table = (Object[]) tableField.get(mapField.get(set));
                    out.println("cap\t" + (table == null ? 0 : table.length));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        out.flush();
    }
}
