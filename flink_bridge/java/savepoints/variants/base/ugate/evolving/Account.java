package ugate.evolving;

/** The POJO whose schema changes between job A and job B (variant: base); see ugate.savepoints.SchemaChanges.
 * Each variant is compiled on its own and put on the classpath of one run, so both jobs see one class name. */
public class Account {
    public long id;
    public long amount;
    public String owner;
    public Account() {}
}
